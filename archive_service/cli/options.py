"""The options every command shares: --config and the settings of a table, and loading them.
Both the Archive's commands and `archive-service resolver` build their options here."""

from __future__ import annotations

import argparse
import os
import stat
import sys

from .. import settings
from ..common import logs, postgres


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
    config, problems = settings.collect(args.config, options, environ, table, required)
    problems += collection_problems(config, required)
    if problems:
        raise settings.ConfigError(*problems)
    logs.configure(config.get("log_format"))
    return config


def collect_config(
    args: argparse.Namespace, *required: str, environ=None
) -> tuple[settings.Config, list[str]]:
    """`load_config`, the problems returned rather than raised (see settings.collect)."""
    options = {s.name: getattr(args, s.name, None) for s in settings.SETTINGS}
    config, problems = settings.collect(args.config, options, environ, required=required)
    logs.configure(config.get("log_format"))
    return config, problems + collection_problems(config, required)


def collection_problems(config: settings.Config, required: tuple[str, ...]) -> list[str]:
    """A line if the collection a command needs is not a directory, with where the setting
    came from: said before anything starts or is minted (serve logged "serving /x" and then
    stopped with "collection /x is not a directory", naming neither the setting nor its
    source)."""
    if "collection" not in required or not config.get("collection"):
        return []
    path = config.collection
    try:
        if stat.S_ISDIR(os.stat(path).st_mode):
            return []
        why = "is a file, not a directory"
    except FileNotFoundError:
        why = "no such directory"
    except OSError as exc:
        why = f"cannot be read ({exc.strerror})"
    source = config.sources.get("collection", "default")
    return [f"setting collection = {path!r} ({source}): {why}"]


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
