"""`archive-service resolver register|serve|list`: assemble settings and run."""

from __future__ import annotations

import argparse
import sys

from .. import setting_values, settings
from ..resolver import config as rconfig
from .options import add_settings, load_config


def _add_settings(parser: argparse.ArgumentParser, names=None) -> None:
    add_settings(parser, names, table=rconfig.RESOLVER_SETTINGS)


def _config(args: argparse.Namespace, *required: str) -> settings.Config:
    return load_config(args, *required, table=rconfig.RESOLVER_SETTINGS)


def _registry(config: settings.Config):
    from ..resolver.registry import Registry, RegistryError

    try:
        return Registry(config.state_dir, config.database)
    except RegistryError as exc:
        raise settings.ConfigError(str(exc)) from None


def cmd_register(args: argparse.Namespace) -> int:
    config = _config(args, "state_dir")
    key = sys.stdin.readline().strip() if args.key == "-" else args.key
    try:
        froms = None if args.sends_from is None else setting_values.networks(args.sends_from)
        registry = _registry(config)
        new = registry.register(args.serviceibi, key, froms)
    except ValueError as exc:
        print(f"archive-service resolver register: {exc}", file=sys.stderr)
        return 2
    print(f"{'registered' if new else 're-keyed'} {args.serviceibi} in {registry.where}")
    return 0


def cmd_list(args: argparse.Namespace) -> int:
    config = _config(args, "state_dir")
    for r in _registry(config).records():
        state = (
            f"included since {r.since} at {r.address} (confirmation {r.confirmation})"
            if r.included
            else "not included" + (f" (excluded {r.since})" if r.since else "")
        )
        froms = f"; sends from {r.sends_from}" if r.sends_from else ""
        print(f"{r.serviceibi}  {state}{froms}")
    return 0


def cmd_serve(args: argparse.Namespace) -> int:
    from ..resolver.server import run

    config = _config(args, "state_dir")
    _registry(config)
    return run(config)


def add_parser(sub) -> None:
    resolver = sub.add_parser(
        "resolver",
        help="run a reference IBI resolver (registry of Archives, persistent URLs)",
        description="A resolver for institutions that run their own: Archives register, join "
        "with inclusionRequest and leave with exclusionRequest; persistent URLs "
        "are resolved by asking every included Archive.",
    )
    rsub = resolver.add_subparsers(dest="resolver_command", required=True, metavar="COMMAND")

    register = rsub.add_parser(
        "register",
        help="register an Archive's service IBI and key",
        description="Register an Archive (§5.1): its service IBI and "
        "registration key; only a hash of the key is kept.",
    )
    register.add_argument("--serviceibi", required=True, help="IBI of the Archive's service")
    register.add_argument(
        "--key",
        required=True,
        help="registration key (10+ digits, optionally -10+ digits); "
        "'-' reads it from standard input",
    )
    register.add_argument(
        "--from",
        dest="sends_from",
        metavar="NETWORKS",
        help="addresses or networks the Archive sends its inclusion and exclusion requests "
        "from (commas or spaces; 'none' clears them): from there a flood of wrong keys from "
        "elsewhere does not keep it out before its first inclusion or after a move "
        "(default: keep what was given before)",
    )
    _add_settings(register, names=("state_dir", "database"))
    register.set_defaults(func=cmd_register)

    serve = rsub.add_parser(
        "serve",
        help="run the resolver under gunicorn",
        description="Run the resolver's service and persistent URLs.",
    )
    _add_settings(serve)
    serve.set_defaults(func=cmd_serve)

    listing = rsub.add_parser("list", help="print the registered Archives and their state")
    _add_settings(listing, names=("state_dir", "database"))
    listing.set_defaults(func=cmd_list)
