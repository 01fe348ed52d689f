"""The IBI toolkit commands of `archive-service`: mint, ibi decode, ibi check, deposit, delete.

Only argument handling and printing live here; the work is done by `mint`, `ibip`, `ibi` and
`deposit`. `cli.build_parser` registers these with `add_commands`.

Exit status: 0 done; 1 refused or invalid (the message says why; nothing was changed);
2 settings missing or unusable.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from decimal import Decimal, InvalidOperation

from .. import deposit as depositmod
from .. import settings
from ..common.net import persistent_url
from ..deposit import mint as mintmod
from ..protocol import ibi as ibimod
from ..protocol import ibip as ibipmod

LoadConfig = Callable[..., settings.Config]
AddSettings = Callable[..., None]


def _fail(command: str, message: object) -> int:
    print(f"archive-service {command}: {message}", file=sys.stderr)
    return 1


def granularity(text: str) -> Decimal:
    """The --granularity of every command that mints (mint, deposit, import)."""
    try:
        return mintmod.as_granularity(Decimal(text))
    except (ValueError, InvalidOperation):
        raise argparse.ArgumentTypeError(f"{text!r} is not 60, 1, 0.1, 0.01, ... seconds") from None


def _add_granularity(parser: argparse.ArgumentParser, help: str) -> None:
    # mint and deposit mint the same way: one option, one parser of it.
    parser.add_argument("--granularity", type=granularity, default=Decimal(1), help=help)


def _port(text: str) -> int:
    if not text.isdigit() or not 1 <= int(text) <= 65535:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port number (1-65535)")
    return int(text)


# ------------------------------------------------------------------------------- mint


def cmd_mint(args: argparse.Namespace, load_config: LoadConfig) -> int:
    config = load_config(args)
    form = args.form
    if form is None and (args.host or args.ip):
        form = "both" if args.host and args.ip else "rep" if args.host else "ibip"
    # --host/--ip describe a subsystem on their own; without them it is this Archive's
    # (archiveaddress, archiveip).
    if args.host or args.ip:
        source = depositmod.subsystem({}, args.host, args.ip, args.port, ("--host", "--ip"))
    else:
        source = depositmod.subsystem(config, port=args.port, options=("--host", "--ip"))
    try:
        form = form or source.form
        missing = [f for f in ("rep", "ibip") if form in (f, "both") and f not in source.forms]
        if missing:
            return _fail("mint", "; ".join(source.why_not[f] for f in missing))
        minted = mintmod.mint(
            source.host,
            source.port,
            source.ip,
            form,
            state_dir=config.state_dir,
            granularity=args.granularity,
            database=config.database,
        )
    except (ibimod.IbiError, mintmod.MintError, depositmod.DepositError) as exc:
        return _fail("mint", exc)
    for kind in ("rep", "ibip"):
        label = getattr(minted, kind)
        if label:
            print(f"{kind} {label}")
    return 0


# -------------------------------------------------------------------------------- ibi


def cmd_ibi_decode(args: argparse.Namespace) -> int:
    try:
        kind = ibimod.parse(args.ibip).kind
        if kind == "rep":
            return _fail(
                "ibi decode",
                f"{args.ibip} is a repository name; only an IBIp "
                "(two words) decodes into IP, port and time",
            )
        decoded = ibipmod.decode(args.ibip)
    except ibimod.IbiError as exc:
        return _fail("ibi decode", exc)
    print(f"ip {decoded.ip}")
    print(f"port {decoded.port}")
    print(f"time {depositmod.iso(decoded.time)}")
    print(f"fraction {decoded.fraction}")
    return 0


def cmd_ibi_check(args: argparse.Namespace) -> int:
    try:
        kind = ibimod.parse(args.label).kind
    except ibimod.IbiError as exc:
        print(f"invalid: {exc}")
        return 1
    print(kind)
    if kind == "ibip":
        try:
            ibipmod.decode(args.label)
        except ibimod.IbiError as exc:
            # Valid by Table 7.1, but not what Algorithms 5-7 write (another minting tool?).
            print(f"note: valid IBIp that does not decode: {exc}", file=sys.stderr)
    return 0


# ------------------------------------------------------------------- deposit, delete


def cmd_deposit(args: argparse.Namespace, load_config: LoadConfig) -> int:
    config = load_config(args, "collection")
    try:
        done = depositmod.deposit(
            config,
            args.files,
            target=args.target,
            language=args.language,
            title=args.title,
            nextedition_of=args.nextedition_of,
            translation_of=args.translation_of,
            granularity=args.granularity,
        )
    except (depositmod.DepositError, ibimod.IbiError, mintmod.MintError) as exc:
        return _fail("deposit", exc)
    except ValueError as exc:  # SidecarError: a related item's sidecar is unusable
        return _fail("deposit", f"{exc}; nothing changed")
    print(
        f"deposited {done.directory} ({len(done.files)} file(s)"
        + (f", target {done.target})" if done.target else ")")
    )
    for kind in ("rep", "ibip"):
        label = getattr(done.minted, kind)
        if label:
            print(f"{kind} {label}")
    for kind in ("rep", "ibip"):
        label = getattr(done.minted, kind)
        url = label and persistent_url(config.resolver, label)
        if url:
            print(f"url {url}")
    for line in done.linked:
        print(f"linked {line}")
    for note in done.notes:
        print(f"note: {note}", file=sys.stderr)
    return 0


def cmd_delete(args: argparse.Namespace, load_config: LoadConfig) -> int:
    config = load_config(args, "collection")
    try:
        done = depositmod.delete(config, args.ibi)
    except (depositmod.DepositError, ibimod.IbiError) as exc:
        return _fail("delete", exc)
    except ValueError as exc:  # SidecarError
        return _fail("delete", f"{exc}; nothing changed")
    print(
        f"deleted {done.item.name}: {done.directory}/item.yaml now says state Deleted, "
        f"timestamp {depositmod.iso(done.when)}"
    )
    if done.moved_to is not None:
        print(f"kept {done.files} file(s): doc/ moved to {done.moved_to} (no longer served)")
    else:
        print("the item had no doc/")
    if not done.comments_kept:
        print(
            "note: item.yaml was rewritten by PyYAML; its comments below the top were not kept",
            file=sys.stderr,
        )
    for other in done.referenced_by:
        print(f"note: still named by {other}", file=sys.stderr)
    return 0


# ---------------------------------------------------------------------------- parsers


def add_commands(
    sub: argparse._SubParsersAction, add_settings: AddSettings, load_config: LoadConfig
) -> None:
    mint = sub.add_parser(
        "mint",
        help="mint a new IBI (repository name and/or IBIp)",
        description="Mint a new IBI of this Archive's identification subsystem (ID "
        "Algorithms 1-7). Host and port default to archiveaddress, the IP to archiveip; the "
        "last date handed out is kept in state_dir (or the shared database), so labels never "
        "repeat. Prints one line per form: 'rep LABEL', 'ibip LABEL'.",
        epilog="examples: archive-service mint --config archive.yaml; "
        "archive-service mint --host mtc-m18.sid.inpe.br --port 19050; "
        "archive-service mint --ip 150.163.34.243 --form ibip",
    )
    mint.add_argument("--host", help="server host name (repository name, ID Algorithm 1)")
    mint.add_argument("--ip", help="server IPv4 or IPv6 address (IBIp, ID Algorithm 5)")
    mint.add_argument(
        "--port",
        type=_port,
        help="server port (default: archiveaddress's, else 80 for names, 800 "
        "for IBIp, which the labels leave out)",
    )
    mint.add_argument(
        "--form",
        choices=mintmod.FORMS,
        help="which form(s) to mint (default: every form that can be)",
    )
    _add_granularity(mint, "temporal distributor step in seconds: 60, 1, 0.1, ... (default 1)")
    add_settings(mint, names=("archiveaddress", "archiveip", "state_dir", "database"))
    mint.set_defaults(func=lambda args: cmd_mint(args, load_config))

    ibi = sub.add_parser(
        "ibi",
        help="decode or check an IBI",
        description="Decode an IBIp, or check either form of an IBI.",
    )
    ibi_sub = ibi.add_subparsers(dest="ibi_command", required=True, metavar="ACTION")
    decode = ibi_sub.add_parser(
        "decode",
        help="print the IP, port and UTC time an IBIp was minted from",
        description="Print 'ip', 'port', 'time' (UTC, ISO 8601) and 'fraction' (of a second) "
        "of an IBIp (ID Algorithms 5-7 inverted).",
        epilog="example: archive-service ibi decode LK47B6W/362SFKH",
    )
    decode.add_argument("ibip", metavar="IBIP")
    decode.set_defaults(func=cmd_ibi_decode)
    check = ibi_sub.add_parser(
        "check",
        help="validate a label; exit 1 with the broken rule if invalid",
        description="Print the form (rep or ibip) and exit 0 if LABEL is a valid IBI; else "
        "print which rule of ID Table 6.1 or 7.1 it breaks, at which character, and exit 1.",
    )
    check.add_argument("label", metavar="LABEL")
    check.set_defaults(func=cmd_ibi_check)

    deposit = sub.add_parser(
        "deposit",
        help="put files into the collection as a new item",
        description="Mint an IBI and create the item: its directory (the repository name, "
        "with the IBIp as 'ibip:' in item.yaml; the IBIp when no name can be minted) with "
        "doc/ and item.yaml, built in <collection>/.deposit-* and renamed into place. "
        "--nextedition-of and --translation-of also write the relation into the other "
        "item's item.yaml, which must be held by this collection: only the changed keys' "
        "lines are rewritten, so its comments are kept; if the file's layout does not allow "
        "that, it is rewritten whole by PyYAML and comments below its top are lost (a note "
        "says so). Prints the IBI, its persistent URL(s) and what was linked.",
        epilog="example: archive-service deposit --config archive.yaml --language pt-BR "
        "--title 'Relatório' relatorio.pdf dados.csv --target relatorio.pdf",
    )
    deposit.add_argument("files", nargs="+", metavar="FILE", help="files for doc/")
    deposit.add_argument(
        "--target",
        metavar="NAME",
        help="the file the bare persistent URL opens (default: index.html, "
        "or the single file; else the file list)",
    )
    deposit.add_argument("--language", metavar="LANG", help="language of the item, e.g. pt-BR")
    deposit.add_argument(
        "--title", help="title, kept as inline Dublin Core (dc: title, language, date, identifier)"
    )
    deposit.add_argument(
        "--nextedition-of",
        metavar="IBI",
        help="the item this one is the next edition of (gets 'nextedition:')",
    )
    deposit.add_argument(
        "--translation-of",
        metavar="IBI",
        help="the item this one translates (both get 'translations:' entries; needs --language)",
    )
    _add_granularity(deposit, "temporal distributor step in seconds (default 1)")
    add_settings(
        deposit,
        names=("collection", "archiveaddress", "archiveip", "state_dir", "database", "resolver"),
    )
    deposit.set_defaults(func=lambda args: cmd_deposit(args, load_config))

    delete = sub.add_parser(
        "delete",
        help="turn an item into a Deleted tombstone",
        description="Keep the item as Deleted: item.yaml gets 'state: Deleted' and "
        "'timestamp:' (now, UTC) plus a comment saying what was done; doc/ is moved to "
        ".deleted-doc-<time>/ inside the item, so no file is removed and none is served. "
        "urlRequest then answers with the Deleted answer. Undo by hand: move the files "
        "back to doc/ and edit item.yaml.",
    )
    delete.add_argument("ibi", metavar="IBI", help="either form of the item's IBI")
    add_settings(delete, names=("collection", "state_dir"))
    delete.set_defaults(func=lambda args: cmd_delete(args, load_config))
