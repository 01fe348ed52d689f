"""The options every command shares: --config and the settings of a table, and loading them.
Both the Archive's commands and `archive-service resolver` build their options here."""

from __future__ import annotations

import argparse
import os
import sys

from .. import settings
from ..common import postgres


def add_settings(parser: argparse.ArgumentParser, names=None, table=settings.SETTINGS) -> None:
    """The --config option and one option per setting of `table` (all, or those in `names`)."""
    parser.add_argument("--config", metavar="FILE", help="YAML file of settings")
    prefix = table[0].env_prefix if table else settings.ENV_PREFIX
    group = parser.add_argument_group(
        "settings", f"each also read from {prefix}<NAME> and from the --config file"
    )
    for setting in table:
        if names is not None and setting.name not in names:
            continue
        default = (
            ""
            if setting.secret or setting.default in (None, "")
            else f" (default: {setting.default})"
        )
        group.add_argument(
            setting.option,
            dest=setting.name,
            metavar=setting.name.upper(),
            help=setting.help + default,
        )


def load_config(
    args: argparse.Namespace, *required: str, environ=None, table=settings.SETTINGS
) -> settings.Config:
    """The settings of `table` from the options, the environment and the --config file;
    those named in `required` must be set."""
    options = {s.name: getattr(args, s.name, None) for s in table}
    return settings.load(args.config, options, environ, table=table, required=required)


def collect_config(
    args: argparse.Namespace, *required: str, environ=None
) -> tuple[settings.Config, list[str]]:
    """`load_config`, the problems returned rather than raised (see settings.collect)."""
    options = {s.name: getattr(args, s.name, None) for s in settings.SETTINGS}
    return settings.collect(args.config, options, environ, required=required)


def say_state_dir(config: settings.Config, command: str) -> None:
    """One line on stderr: the state dir a command reads, and where that came from, so that
    an admin sees whether it is the service's."""
    source = config.sources.get("state_dir", "default")
    if source == "default":
        source = "default: " + (
            "$STATE_DIRECTORY" if os.environ.get("STATE_DIRECTORY") else "no setting"
        )
    print(f"archive-service {command}: state dir {config.state_dir} ({source})", file=sys.stderr)
    if config.get("database"):
        shared = postgres.redacted(config.database)
        print(f"archive-service {command}: shared state in database {shared}", file=sys.stderr)
