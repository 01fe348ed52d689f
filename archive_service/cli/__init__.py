"""The `archive-service` command: it assembles settings and runs; the logic lives elsewhere."""

from __future__ import annotations

import argparse
import contextlib
import csv
import json
import logging
import os
import sys
import warnings
from datetime import UTC, date, datetime
from pathlib import Path
from urllib.parse import quote, urlencode

from .. import __version__, settings
from ..common import logs, progress
from . import imports as imports_cli
from . import oaipmh as oaipmh_cli
from . import resolver as resolver_cli
from . import toolkit
from .options import add_settings, collect_config, load_config, say_state_dir

log = logging.getLogger("archive_service")


def load_archive(
    args: argparse.Namespace, environ=None, announcing: bool = False
) -> settings.Config:
    """The settings of one Archive, its address and service IBI filled in when not given
    (serve/identity.py); every problem, and with `announcing` those of the announcement
    too, in one ConfigError."""
    from ..serve import announce, identity

    config, problems = collect_config(args, "collection", environ=environ)
    config = identity.complete(config, problems)
    if announcing:
        announce.from_config(config, problems=problems)
    if problems:
        raise settings.ConfigError(*problems)
    return config


def cmd_serve(args: argparse.Namespace) -> int:
    from ..indexer.startup import refresh_early

    if args.no_announce:
        args.resolver = "none"
    # The key leaves the environment before anything is forked or started; the master keeps
    # it here so that a reload (SIGHUP), which reads the settings again, still has it.
    secrets = settings.withdraw_secrets()

    def configure() -> settings.Config:  # again on SIGHUP
        return load_archive(args, environ={**os.environ, **secrets}, announcing=True)

    config = configure()
    refresh_early(config)  # the index's walk runs while the server's modules load
    from ..serve.runner import run

    return run(config, reload_config=configure)


def cmd_query(args: argparse.Namespace) -> int:
    from ..web import create_app

    config = load_archive(args)
    say_state_dir(config, "query")  # its urlkeys are the service's only with the same one
    params = {
        "servicesubject": "urlRequest",
        "clientinformation.ipaddress": args.client_ip,
        "parsedibiurl.ibi": args.ibi,
    }
    if args.filepath:
        params["parsedibiurl.filepath"] = args.filepath
    if args.verblist:
        params["parsedibiurl.verblist"] = args.verblist
    app = create_app(config)
    response = app.test_client().get(
        "/" + config.archiveserviceibi, query_string=urlencode(params, quote_via=quote)
    )
    body = response.get_data(as_text=True)
    if response.status_code != 200:
        print(f"archive-service query: HTTP {response.status_code}: {body}", file=sys.stderr)
        return 2
    if body:
        print(body.replace("\r\n", "\n"))
    else:
        print(
            f"archive-service query: {args.ibi} is not held by this Archive (empty answer)",
            file=sys.stderr,
        )
    return 0


def cmd_check(args: argparse.Namespace) -> int:
    if args.directory:
        args.collection = args.directory
    from ..collection import sidecar
    from ..index import check as checkmod

    config = load_config(args, "collection")
    problems, count = checkmod.check(config.collection, config.state_dir)
    if config.allow_internal:  # the admin's word that readers may be sent there
        problems = [p for p in problems if not p.message.endswith(sidecar.INTERNAL_LOCATION)]
    for problem in problems:
        print(problem)
    broken = _check_links(args, config) if args.links else 0
    if problems:
        print(f"{len(problems)} problem(s) in {config.collection} ({count} items read)")
        return 1
    if broken:
        return 1
    print(f"{config.collection}: {count} items, no problems")
    return 0


def _check_links(args: argparse.Namespace, config: settings.Config) -> int:
    """`check --links`: the broken links that leave the Archive, one line each; how many."""
    from ..collection import items, links
    from ..web import persistent_url

    catalog = items.scan(Path(config.collection))
    found = links.outside_links(
        catalog.by_directory.values(),
        catalog.lookup,
        lambda ibi: persistent_url(config.resolver, ibi),
    )
    bar = progress.on_terminal("links")
    checker = links.Checker(
        timeout=args.links_timeout,
        per_host=args.links_per_host,
        allow_internal=config.allow_internal,
    )
    try:
        outcomes = checker.check_all(found, bar)
    finally:
        if bar is not None:
            bar.close()
    broken = [(link, outcome) for link, outcome in outcomes if outcome.broken]
    for link, outcome in broken:
        print(f"broken link: {link.url}: {outcome.describe()}; named by {', '.join(link.named_by)}")
    if config.resolver == "none":
        print("links: relations to items elsewhere not checked (resolver none)", file=sys.stderr)
    print(f"{len(found)} link(s) leaving the Archive checked, {len(broken)} broken")
    return len(broken)


def _day(text: str) -> date:
    try:
        return date.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a date YYYY-MM-DD") from None


def _count(text: str) -> int:
    if not text.isdigit():
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number (0: every item)")
    return int(text)


@contextlib.contextmanager
def _describer(config: settings.Config):
    """What the Item Report says of each item (title, publisher, year, type, persistent URL),
    read from the collection's index when the settings name a collection that has one;
    otherwise None: items are named by their IBI (said once)."""
    from ..index.catalog import StoreCatalog
    from ..index.store import Store
    from ..stores.stats import counter
    from ..web import persistent_url

    store = Store(config.collection, config.state_dir) if config.collection else None
    if store is None or not store.exists() or not store.is_complete():
        print(
            "archive-service stats: no index of a collection (give --collection, or a --config "
            "naming it): items are named by their IBI, with no title, publisher or type",
            file=sys.stderr,
        )
        yield None
        return
    catalog = StoreCatalog(store)
    try:
        yield counter.describer(catalog.lookup, lambda ibi: persistent_url(config.resolver, ibi))
    finally:
        catalog.close()


def cmd_stats(args: argparse.Namespace) -> int:
    from ..serve import identity
    from ..stores import stats
    from ..stores.stats import counter

    config = load_config(args)
    say_state_dir(config, "stats")
    fmt = args.format or ("tsv" if args.report == "ir" else "table")
    allowed = ("tsv", "json") if args.report == "ir" else ("table", "csv", "json")
    if fmt not in allowed:
        print(
            f"archive-service stats: --report {args.report} is written as "
            f"{' or '.join(allowed)}, not {fmt}",
            file=sys.stderr,
        )
        return 2
    try:
        store = stats.open_store(config.state_dir, config.database)
        if args.report == "ir":
            # UTC's month, as every use's day is: the local date named the wrong month for
            # the hours around the turn of one.
            this_month = datetime.now(UTC).date().replace(day=1)
            begin, end = args.begin or args.end or this_month, args.end or args.begin or this_month
            if end < begin:
                print("archive-service stats: --end is before --begin", file=sys.stderr)
                return 2
            platform = config.archiveserviceibi
            if not platform:
                try:
                    platform = identity.kept(Path(config.state_dir) / identity.SERVICE_FILE)
                except (ValueError, OSError):
                    platform = None
            bar = progress.on_terminal("report")
            try:
                with _describer(config) as describe:
                    report = store.item_report(
                        begin, end, platform or "archive-service", describe=describe, progress=bar
                    )
            finally:
                if bar is not None:
                    bar.close()
        else:
            report = store.report(args.since, args.top or None)
    except stats.StatsError as exc:
        print(f"archive-service stats: {exc}", file=sys.stderr)
        return 2
    if args.report == "ir":
        if fmt == "json":
            print(json.dumps(counter.sushi(report), indent=2))
        else:
            csv.writer(sys.stdout, delimiter="\t", lineterminator="\n").writerows(
                counter.tsv_rows(report)
            )
    elif fmt == "json":
        print(json.dumps(report, indent=2))
    elif fmt == "csv":
        csv.writer(sys.stdout, lineterminator="\n").writerows(stats.rows(report))
    else:
        print(stats.table(report))
    return 0


def _month(text: str) -> date:
    try:
        return datetime.strptime(text, "%Y-%m").date()
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a month YYYY-MM") from None


def cmd_index(args: argparse.Namespace) -> int:
    from ..indexer.startup import LiveIndex
    from ..indexer.watch import run_indexer

    config = load_config(args, "collection")
    live = LiveIndex(config)
    if args.watch:
        return run_indexer(live.store, config, lock_fd=args.lock_fd, owner_fd=args.owner_fd)
    bar = progress.on_terminal("index")
    try:
        result = live.refresh(bar)
    finally:
        if bar is not None:
            bar.close()
    try:
        count, problems = live.catalog.count(), live.catalog.problems
    finally:
        live.catalog.close()
    print(f"{config.collection}: {count} items served; {result}; index {live.store.path}")
    if problems:
        print(f"{len(problems)} problem(s): archive-service check {config.collection} lists them")
    return 0


class _CommandParser(argparse.ArgumentParser):
    """A command's parser refuses what it does not know itself, with its own usage: argparse
    hands a command's unknown arguments up to the top-level parser, whose usage names no
    option of the command (`stats --collection` printed `archive-service [-h] ... COMMAND`)."""

    def parse_known_args(self, args=None, namespace=None):
        namespace, extras = super().parse_known_args(args, namespace)
        if extras:
            self.error("unrecognized arguments: " + " ".join(extras))
        return namespace, extras


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="archive-service",
        description="Serve an on-disk collection as an Archive of the IBI resolution system.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(
        dest="command", required=True, metavar="COMMAND", parser_class=_CommandParser
    )

    _add_serve(sub)
    _add_query(sub)
    _add_check(sub)
    _add_index(sub)
    toolkit.add_commands(sub, add_settings, load_config)  # mint, ibi, deposit, delete
    sources = imports_cli.add_parser(sub, add_settings, load_config)  # import manifest|bagit
    oaipmh_cli.add_parser(sources, add_settings, load_config)  # import oai-pmh
    _add_stats(sub)
    _add_init(sub)
    _add_db(sub)
    resolver_cli.add_parser(sub)
    return parser


def _add_serve(sub) -> None:
    serve = sub.add_parser(
        "serve",
        help="run the Archive service under gunicorn",
        description="Run the Archive service (and /col/ files) under gunicorn. It belongs "
        "behind nginx or Apache (contrib/), listening on 127.0.0.1 (the default bind): alone "
        "on the Internet, slow clients hold its threads and starve the others (it warns at "
        "start when it listens elsewhere with no proxy named in trusted_proxies).",
    )
    serve.add_argument(
        "--no-announce",
        action="store_true",
        help="do not join the resolver (same as --resolver none), for development",
    )
    add_settings(serve)
    serve.set_defaults(func=cmd_serve)


def _add_query(sub) -> None:
    query = sub.add_parser(
        "query",
        help="print what urlRequest answers for an IBI",
        description="Print exactly what urlRequest would answer.",
    )
    query.add_argument("ibi", help="either form of the IBI")
    query.add_argument(
        "--verblist", help='verbs separated by spaces, e.g. "GetLastEdition GetMetadata(oai_dc)"'
    )
    query.add_argument("--filepath", help="a file of the item, e.g. /reference.bib")
    query.add_argument(
        "--client-ip", default="127.0.0.1", help="the user's IP address (default: 127.0.0.1)"
    )
    add_settings(
        query,
        names=(
            "collection",
            "archiveaddress",
            "archiveserviceibi",
            "platformsoftware",
            "url_base",
            "state_dir",
        ),
    )
    query.set_defaults(func=cmd_query)


def _add_check(sub) -> None:
    check = sub.add_parser(
        "check",
        help="validate a collection; exit 1 on problems",
        description="Validate every item and sidecar of a collection.",
    )
    check.add_argument("directory", nargs="?", help="the collection (or give --collection)")
    check.add_argument(
        "--links",
        action="store_true",
        help="also follow every link leaving the Archive (locations, relations to items "
        "elsewhere through the resolver) and report the broken ones",
    )
    check.add_argument(
        "--links-timeout",
        type=float,
        default=10.0,
        metavar="SECONDS",
        help="how long a link may keep us waiting (default 10)",
    )
    check.add_argument(
        "--links-per-host",
        type=int,
        default=2,
        metavar="N",
        help="links asked at once of one host (default 2)",
    )
    imports_cli.add_allow_internal(check)
    add_settings(check, names=("collection", "resolver", "state_dir"))
    check.set_defaults(func=cmd_check)


def _add_index(sub) -> None:
    index = sub.add_parser(
        "index",
        help="build or refresh the collection's index (for cron jobs and checking)",
        description="Bring the persistent index up to date with the collection, re-reading only "
        "what changed; with --watch, keep it current until stopped.",
    )
    index.add_argument(
        "--watch",
        action="store_true",
        help="keep the index current (as serve's indexer does) until SIGTERM",
    )
    # The watch lock, taken and handed over by the Follower thread of the serving worker that
    # started this indexer (indexer/follower.py); end of file on --owner-fd: that worker is gone.
    index.add_argument("--lock-fd", type=int, help=argparse.SUPPRESS)
    index.add_argument("--owner-fd", type=int, help=argparse.SUPPRESS)
    add_settings(
        index,
        names=("collection", "state_dir", "index_watch", "rescan_interval", "consistency_interval"),
    )
    index.set_defaults(func=cmd_index)


def _add_stats(sub) -> None:
    report = sub.add_parser(
        "stats",
        help="print access statistics counted from acknowledgments",
        description="Print the acknowledgments this Archive counted (per item, per day, by "
        "contenttype and state) and those it refused. In JSON, `total` is the "
        "number counted and `rejected` the number refused.",
    )
    report.add_argument(
        "--since", type=_day, metavar="DATE", help="count from this UTC day on (YYYY-MM-DD)"
    )
    report.add_argument(
        "--top",
        type=_count,
        default=20,
        metavar="N",
        help="list the N most acknowledged items (default: 20; 0: all)",
    )
    report.add_argument(
        "--format",
        choices=("table", "csv", "json", "tsv"),
        default=None,
        help="output format: table, csv or json (default: table); for --report ir, tsv or "
        "json (COUNTER_SUSHI's shape; default: tsv)",
    )
    report.add_argument(
        "--report",
        choices=("summary", "ir"),
        default="summary",
        help="summary: the acknowledgments counted and refused (default); ir: the COUNTER "
        "R5.1 Item Report of the uses seen, robots and double-clicks out (docs/counter.md)",
    )
    report.add_argument(
        "--begin", type=_month, metavar="YYYY-MM", help="first month of --report ir"
    )
    report.add_argument("--end", type=_month, metavar="YYYY-MM", help="last month of --report ir")
    add_settings(
        report, names=("state_dir", "database", "archiveserviceibi", "collection", "resolver")
    )
    report.set_defaults(func=cmd_stats)


def _add_init(sub) -> None:
    init = sub.add_parser(
        "init",
        help="write a commented archive-service.yaml with every setting, to edit",
        description="Write DIR/archive-service.yaml (default: the current directory): every "
        "setting with its meaning, the state dir named, secrets as *_file references; mode "
        "0600; an existing file is never overwritten.",
    )
    init.add_argument("directory", nargs="?", default=".", metavar="DIR")
    init.add_argument(
        "--collection", metavar="DIR", help="the collection to write in the file (else left out)"
    )
    init.set_defaults(func=cmd_init)


def _add_db(sub) -> None:
    db = sub.add_parser(
        "db",
        help="the shared database (the database setting): db upgrade",
        description="Bring the PostgreSQL schema named by the database setting up to date "
        "(serve does it at start too). With the SQLite default there is nothing to do.",
    )
    db.add_argument("action", choices=("upgrade",))
    add_settings(db, names=("database",))
    db.set_defaults(func=cmd_db)


def cmd_db(args: argparse.Namespace) -> int:
    from ..common import postgres

    config = load_config(args)
    if not config.database:
        print("database is not set: the state lives in SQLite files in state_dir, nothing to do")
        return 0
    try:
        applied = postgres.upgrade(config.database)
    except postgres.DatabaseError as exc:
        print(f"archive-service db upgrade: {exc}", file=sys.stderr)
        return 1
    where = postgres.redacted(config.database)
    print(f"{where}: applied {', '.join(applied)}" if applied else f"{where}: up to date")
    return 0


def cmd_init(args: argparse.Namespace) -> int:
    path = os.path.join(args.directory, "archive-service.yaml")
    values = {"state_dir": settings.default_state_dir()}
    if args.collection:
        values["collection"] = os.path.abspath(args.collection)
    text = settings.example_file(values)
    try:
        os.makedirs(args.directory, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        print(f"archive-service init: {path} already exists; not overwritten", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"archive-service init: {path}: {exc.strerror}", file=sys.stderr)
        return 2
    os.fchmod(fd, 0o600)  # whatever the umask: the file will name the key's file
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        out.write(text)
    print(f"wrote {path}: edit it, then archive-service serve --config {path}")
    return 0


def _show_warning(show):
    """Settings warnings as one plain log line (no file, line number or source line of ours);
    other warnings as Python shows them."""

    def showwarning(message, category, filename, lineno, file=None, line=None):
        if issubclass(category, settings.ConfigWarning):
            logging.getLogger("archive_service.settings").warning("%s", message)
        else:
            show(message, category, filename, lineno, file, line)

    return showwarning


def main(argv: list[str] | None = None) -> int:
    logs.configure()
    warnings.simplefilter("default", settings.ConfigWarning)
    logging.captureWarnings(True)
    warnings.showwarning = _show_warning(warnings.showwarning)
    args = build_parser().parse_args(argv)
    try:
        code = args.func(args)
        sys.stdout.flush()  # here, where a reader gone away is still ours to handle
        return code
    except BrokenPipeError:
        # `archive-service stats | head`: the reader has what it wanted; no traceback, and
        # no second error when Python flushes stdout at exit.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    except settings.ConfigError as exc:
        print(f"archive-service: {exc}", file=sys.stderr)
        return 2
    except FileNotFoundError as exc:
        print(f"archive-service: {exc}", file=sys.stderr)
        return 2
