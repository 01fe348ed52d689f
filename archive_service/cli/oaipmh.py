"""`archive-service import oai-pmh URL`: harvest a data provider (imports/oaipmh.py) and
apply its records through `run_import` (cli/imports.py); only arguments and printing here."""

from __future__ import annotations

import argparse
import itertools
import sys

from ..common.logs import shown
from .imports import NAMES, AddSettings, LoadConfig, add_allow_internal, add_common, run_import

# Records a streamed harvest applies at a time (checked, then applied): memory stays flat.
BATCH = 500
LIMITS = ("oai_max_records", "oai_max_bytes", "oai_max_seconds", "oai_max_retry_wait")


def _date(text: str) -> str:
    from ..imports.oaipmh import since

    try:
        return since(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def cmd_oaipmh(args: argparse.Namespace, load_config: LoadConfig) -> int:
    from ..imports import oaipmh

    config = load_config(args, "collection")  # the settings' problems before a long harvest
    start = None
    try:
        start = args.from_date or oaipmh.last_harvest(config, args.url, args.set)
        harvest = oaipmh.Harvest(
            args.url,
            set_spec=args.set,
            from_date=start,
            limits=oaipmh.Limits.of(config),
            batch=BATCH,
        )
        records = iter(harvest)
        first = next(records, None)  # the provider's refusals come before any change
    except oaipmh.HarvestError as exc:
        print(
            f"archive-service import oai-pmh: {shown(str(exc))}; nothing changed", file=sys.stderr
        )
        return 1
    # Streamed into the import a batch at a time; deletions come as deleted headers (a record
    # a harvest did not list is not gone).
    stream = itertools.chain(() if first is None else (first,), records)
    source = oaipmh.source_name(args.url)
    status = run_import(
        args,
        load_config,
        source,
        lambda: stream,
        complete=False,
        batch=BATCH,
        stops=(oaipmh.HarvestError,),
    )
    for line in harvest.skipped:
        print(f"skipped: {shown(line)}", file=sys.stderr)
    if harvest.skipped_count > len(harvest.skipped):
        print(f"skipped: {harvest.skipped_count - len(harvest.skipped)} more", file=sys.stderr)
    print(
        f"harvested {harvest.count} records"
        + (f" changed since {start}" if start else "")
        + f", {harvest.skipped_count} skipped",
        file=sys.stderr,
    )
    if harvest.stopped is not None:
        kept = "checked (dry run)" if args.dry_run else "applied and kept"
        print(
            f"archive-service import oai-pmh: stopped: {harvest.stopped}; the "
            f"{harvest.count} records harvested before were {kept}",
            file=sys.stderr,
        )
        return 1
    if status == 0 and not args.dry_run:
        oaipmh.remember_harvest(config, harvest)
    return status


def add_parser(
    sources: argparse._SubParsersAction, add_settings: AddSettings, load_config: LoadConfig
) -> None:
    """`import oai-pmh`, among the `import` command's sources."""
    parser = sources.add_parser(
        "oai-pmh",
        help="an OAI-PMH data provider (DSpace, EPrints, Invenio, Dataverse …)",
        description="Harvest the oai_dc records of an OAI-PMH data provider: each record "
        "becomes an item whose location is its landing page (its first http(s) "
        "dc:identifier) and whose inline dc is its Dublin Core; a deleted record becomes a "
        "Deleted tombstone; a record with no landing page is skipped and named. The "
        "provider's date of the last harvest applied is kept in state_dir: the next run "
        "asks only for what changed since (--from overrides it). Records are applied as they "
        "come, a batch at a time; a harvest stops at its caps (oai_max_records, "
        "oai_max_bytes, oai_max_seconds, oai_max_retry_wait), saying which, and keeps what it "
        "applied. A redirect to another host is refused when that host is an internal "
        "address (loopback, link-local, private) unless --allow-internal.",
        epilog="example: archive-service import oai-pmh --config archive.yaml "
        "https://repo.example.org/oai/request --set theses",
    )
    parser.add_argument("url", metavar="URL", help="the provider's base URL")
    parser.add_argument("--set", metavar="SPEC", help="harvest this set only")
    parser.add_argument(
        "--from",
        dest="from_date",
        type=_date,
        metavar="DATE",
        help="only records changed since DATE (YYYY-MM-DD or YYYY-MM-DDThh:mm:ssZ, UTC); "
        "1970-01-01 harvests everything again",
    )
    add_allow_internal(parser)
    add_common(parser, add_settings, names=(*NAMES, *LIMITS))
    parser.set_defaults(func=lambda args: cmd_oaipmh(args, load_config))
