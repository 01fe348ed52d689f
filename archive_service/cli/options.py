"""The options every command shares: --config and the settings of a table, and loading them.
Both the Archive's commands and `archive-service resolver` build their options here."""

from __future__ import annotations

import argparse

from .. import settings


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
    config = settings.load(args.config, options, environ, table=table)
    config.require(*required)
    return config
