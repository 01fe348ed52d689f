"""`archive-service import manifest|bagit`: read a source's records and apply them
(imports/apply.py); only arguments and printing here. A source of its own adds its
subcommand to the `import` parser `add_parser` returns, and runs through `run_import`.

Exit status: 0 done; 1 refused (every problem printed, one line each, nothing changed) or
stopped midway (what was done is kept and mapped: run again); 2 settings unusable.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Iterable

from .. import deposit as depositmod
from .. import settings
from ..common import progress
from ..common.logs import shown
from ..deposit import mint as mintmod
from ..imports import apply as applymod
from ..imports.records import Record
from ..protocol import ibi as ibimod
from . import toolkit

LoadConfig = Callable[..., settings.Config]
AddSettings = Callable[..., None]
NAMES = ("collection", "archiveaddress", "archiveip", "state_dir", "database")


def run_import(
    args: argparse.Namespace,
    load_config: LoadConfig,
    source: str,
    read: Callable[[], Iterable[Record] | tuple[Iterable[Record], list[str]]],
    *,
    complete: bool,
    batch: int | None = None,
    stops: tuple[type[Exception], ...] = (),
) -> int:
    """Read the records (`read`: the records, or the records and the problems met reading
    them), apply them, print what was done; the shared tail of every `import` subcommand.
    `batch`: the records are streamed (imports/apply.py); `stops`: the errors of reading
    them midway (a harvest's), reported as a stop."""
    command = f"import {args.import_command}"
    config = load_config(args, "collection")
    bar = progress.on_terminal("import")
    try:
        got = read()
        records, problems = got if isinstance(got, tuple) else (got, [])
        summary = applymod.apply(
            config,
            source,
            records,
            dry_run=args.dry_run,
            complete=complete,
            progress=bar,
            granularity=args.granularity,
            problems=problems,
            batch=batch,
            keep_actions=args.dry_run or args.verbose,
        )
    except applymod.ImportRefused as exc:
        from ..imports.manifest import shorten

        for problem in shorten(exc.problems):
            print(shown(problem), file=sys.stderr)
        before = (
            f"; the {exc.applied} records before its batch are applied and kept"
            if exc.applied
            else ", nothing changed"
        )
        print(f"archive-service {command}: refused{before}", file=sys.stderr)
        return 1
    # OSError: the collection full or read-only midway (apply says so); it was a traceback.
    except (
        depositmod.DepositError,
        ibimod.IbiError,
        mintmod.MintError,
        ValueError,
        OSError,
        *stops,
    ) as exc:
        print(
            f"archive-service {command}: stopped: {shown(str(exc))}; what was done before is "
            "kept and "
            "mapped, run again to go on",
            file=sys.stderr,
        )
        return 1
    finally:
        if bar is not None:
            bar.close()
    if args.dry_run or args.verbose:
        for action in summary.actions:
            print(shown(action))
    for note in summary.notes:
        print(f"note: {shown(note)}", file=sys.stderr)
    print(("dry run: " if args.dry_run else "") + summary.line())
    return 0


def add_allow_internal(parser: argparse.ArgumentParser) -> None:
    """--allow-internal: the `allow_internal` setting, yes, as a flag."""
    parser.add_argument(
        "--allow-internal",
        dest="allow_internal",
        action="store_const",
        const="yes",
        help="let links and redirects reach loopback, link-local and private addresses "
        "(the allow_internal setting)",
    )


def add_common(
    parser: argparse.ArgumentParser, add_settings: AddSettings, names: tuple[str, ...] = NAMES
) -> None:
    """The options every import subcommand takes."""
    parser.add_argument(
        "--dry-run", action="store_true", help="check everything and print what would be done"
    )
    parser.add_argument("--verbose", action="store_true", help="print each action done")
    parser.add_argument(
        "--granularity",
        type=toolkit.granularity,
        default=applymod.GRANULARITY,
        help=f"seconds between the IBIs minted (default {applymod.GRANULARITY}: up to "
        f"{int(1 / applymod.GRANULARITY)} a second)",
    )
    add_settings(parser, names=names)


def cmd_manifest(args: argparse.Namespace, load_config: LoadConfig) -> int:
    from ..imports import manifest

    return run_import(
        args,
        load_config,
        manifest.source_name(args.file),
        lambda: manifest.scan(args.file, args.root),
        complete=True,
    )


def cmd_bagit(args: argparse.Namespace, load_config: LoadConfig) -> int:
    from ..imports import bags

    return run_import(args, load_config, bags.SOURCE, lambda: bags.read(args.bags), complete=False)


def add_parser(
    sub: argparse._SubParsersAction, add_settings: AddSettings, load_config: LoadConfig
) -> argparse._SubParsersAction:
    """The `import` command; returns its subparsers, for more sources."""
    parser = sub.add_parser(
        "import",
        help="bring an existing repository in (manifest, BagIt, OAI-PMH), re-runnable",
        description="Bring items of an existing repository into the collection without moving "
        "its files elsewhere: each record of the source is minted an IBI once (the mapping "
        "source id -> IBI is kept in state_dir or the database), updated when it changed, "
        "and turned into a Deleted tombstone when the source deleted it. Every record is "
        "checked first: a problem stops the import before anything changes.",
    )
    sources = parser.add_subparsers(dest="import_command", required=True, metavar="SOURCE")
    manifest = sources.add_parser(
        "manifest",
        help="a CSV or YAML file, one row per item",
        description="Import the items a CSV or YAML manifest lists: columns id, files (paths "
        "under the manifest's directory, ';' between them in CSV) or location (http(s) URL), "
        "title, language, date, and edition_of, translation_of, metadata_of naming other "
        "rows' ids. A row no longer in the manifest becomes a Deleted tombstone.",
        epilog="example: archive-service import manifest --config archive.yaml items.csv",
    )
    manifest.add_argument("file", metavar="FILE", help="the manifest (.csv, .yaml or .yml)")
    manifest.add_argument(
        "--root",
        metavar="DIR",
        help="the directory files must lie under (default: the manifest's directory)",
    )
    add_common(manifest, add_settings)
    manifest.set_defaults(func=lambda args: cmd_manifest(args, load_config))
    bagit = sources.add_parser(
        "bagit",
        help="BagIt bags, one item each",
        description="Import BagIt bags (RFC 8493), each validated first: its payload (data/) "
        "becomes the item's doc/, bag-info.txt its inline Dublin Core (Title, "
        "External-Description, External-Identifier, Source-Organization, DC-<element> …; "
        "Edition-Of, Translation-Of, Metadata-Of name other bags; README's table lists every "
        "label, and Bagging-Date and Contact-Name are not kept). A bag's id is its "
        "directory's name; bags not given are left as they are.",
    )
    bagit.add_argument("bags", nargs="+", metavar="DIR", help="bag directories")
    add_common(bagit, add_settings)
    bagit.set_defaults(func=lambda args: cmd_bagit(args, load_config))
    return sources
