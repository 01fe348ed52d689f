"""What a deposit, revision or deletion holds while it works: the deposit lock (on every node
with `database`), the minting subsystem it mints from, and `Holdings`, the items of the
collection as the persistent index and the directories it names say (see deposit/__init__.py)."""

from __future__ import annotations

import fcntl
import logging
import os
import sqlite3
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ..collection import items
from ..collection.items import Item
from ..common.net import host_port
from ..index import catalog as catalogmod
from ..index import records as recordsmod
from ..index import store as storemod
from ..index import walk as walkmod
from ..protocol import ibi as ibimod
from ..protocol import ibip as ibipmod
from ..protocol.catalog import claim, directory_of, is_served
from ..protocol.ibi import Ibi
from . import mint as mintmod

log = logging.getLogger(__name__)

LOCK_FILE = "deposit.lock"
PENDING_FILE = "deposit.pending"
TEMP_PREFIX = ".deposit-"
DELETED_PREFIX = ".deleted-doc-"
REPLACED_PREFIX = ".replaced-doc-"


class DepositError(Exception):
    """A deposit or deletion refused; the message is one line and nothing was changed."""


def iso(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


# ---------------------------------------------------------------- the minting subsystem


@dataclass(frozen=True)
class Subsystem:
    """What labels can be minted from: host (repository names) and/or IP (IBIp), one port.

    `port` None means each form's own default (80 for names, 800 for IBIp), as Algorithms 1
    and 5 omit them; `why_not` says why a form is unavailable.
    """

    host: str | None
    ip: str | None
    port: int | None
    why_not: dict[str, str] = field(default_factory=dict)

    @property
    def forms(self) -> tuple[str, ...]:
        return tuple(f for f, ok in (("rep", self.host), ("ibip", self.ip)) if ok)

    @property
    def form(self) -> str:
        """'both' when both forms can be minted, else the one that can."""
        forms = self.forms
        if not forms:
            raise DepositError("no IBI can be minted: " + "; ".join(self.why_not.values()))
        return "both" if len(forms) == 2 else forms[0]


def subsystem(
    config: Mapping[str, Any],
    host: str | None = None,
    ip: str | None = None,
    port: int | None = None,
    options: tuple[str, str] = ("--archiveaddress", "--archiveip"),
) -> Subsystem:
    """The identification subsystem of this Archive: host and port from `archiveaddress`, IP
    from `archiveip`, unless given. A form whose inputs are missing or invalid is left out.
    `options` are the calling command's options that give a host and an IP, named in the
    reasons (deposit has no --host or --ip: its message named mint's)."""
    why_not: dict[str, str] = {}
    if host is None and config.get("archiveaddress"):
        host, address_port = host_port(config["archiveaddress"], None)
        port = address_port if port is None else port
    if ip is None:
        ip = config.get("archiveip") or None
    if host is None:
        why_not["rep"] = f"a repository name needs a host (archiveaddress or {options[0]})"
    else:
        try:
            mintmod.rep_prefix(host, mintmod.REP_DEFAULT_PORT if port is None else port)
        except ibimod.IbiError as exc:
            why_not["rep"], host = f"no repository name: {exc}", None
    if ip is None:
        why_not["ibip"] = f"an IBIp needs an IP address (archiveip or {options[1]})"
    else:
        try:
            ibipmod.encode_prefix(ip, ibipmod.IBIP_DEFAULT_PORT if port is None else port)
        except ibimod.IbiError as exc:
            why_not["ibip"], ip = f"no IBIp: {exc}", None
    return Subsystem(host, ip, port, why_not)


# ---------------------------------------------------------------------------- locking


@contextmanager
def locked(state_dir: str | os.PathLike[str], database: str = "") -> Iterator[None]:
    """Exclusive lock shared by every deposit and delete using `state_dir`, and with
    `database` (several nodes) by those of every node."""
    Path(state_dir).mkdir(parents=True, exist_ok=True)
    with open(Path(state_dir) / LOCK_FILE, "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file is closed
        if not database:
            yield
            return
        # Each node's deposit.lock is in its own state_dir, but the collection is shared: two
        # nodes depositing `--nextedition-of` one item both found it without a next edition
        # and both wrote its sidecar (one new edition linked from nowhere). A session
        # advisory lock on a connection of its own: released by the server if we die. One
        # key per database (an Archive's own, README): deposits are rare, so two Archives in
        # schemas of one database merely wait for each other.
        import psycopg

        from ..common import postgres

        key = postgres.advisory_key("deposit")
        try:
            conn = postgres.session(database, "archive-service deposit")
        except postgres.DatabaseError as exc:
            raise DepositError(f"cannot lock deposits on every node: {exc}") from None
        try:
            try:
                if not conn.execute("SELECT pg_try_advisory_lock(%s)", (key,)).fetchone()[0]:
                    log.info("waiting for another node's deposit or deletion to end")
                    conn.execute("SELECT pg_advisory_lock(%s)", (key,))
            except psycopg.Error as exc:
                where = postgres.redacted(database)
                raise DepositError(f"cannot lock deposits in database {where}: {exc}") from None
            yield
        finally:
            conn.close()


# ----------------------------------------------------------- what the collection holds


class Holdings:
    """The `items.Catalog` look-ups deposit and delete make, answered from the persistent
    index and the directories it names, read from disk (see the module docstring).

    Use under `locked()`: the pending list is read and written by one command at a time."""

    def __init__(self, config: Mapping[str, Any]):
        self.root = Path(config["collection"])
        self.state_dir = Path(config["state_dir"])
        self.store = storemod.Store(self.root, self.state_dir)
        self.pending_path = self.state_dir / PENDING_FILE
        self.read: dict[str, Item | None] = {}  # directory -> its item as on disk now
        self.scanned: items.Catalog | None = None
        self.catalog: catalogmod.StoreCatalog | None = None
        if not self.store.is_complete() and (why := self._build()) is not None:
            log.warning(
                "no complete index of %s in %s (%s): reading the whole collection instead",
                self.root,
                self.store.state_dir,
                why,
            )
            self.scanned = items.scan(self.root)
            return
        self.catalog = catalogmod.StoreCatalog(self.store)
        self.pending = self._read_pending()
        if self.pending:
            self._refresh(self.pending)

    def close(self) -> None:
        if self.catalog is not None:
            self.catalog.close()

    # -- the index -----------------------------------------------------------------------

    def _build(self) -> str | None:
        """Build the index on first use, unless a refresh (the indexer's first build) holds
        it; why not, or None when built."""
        try:
            if not self.store.write_lock_free():
                return "its first build is running"
            log.info(
                "building the index of %s in %s (first use; later deposits read it)",
                self.root,
                self.store.state_dir,
            )
            storemod.Writer(self.store).refresh(progress=True)
        except (sqlite3.Error, OSError) as exc:
            return f"it cannot be built: {exc}"
        return None if self.store.is_complete() else "it is still incomplete"

    def _refresh(self, directories: Iterable[str]) -> None:
        """Bring the index up to date for `directories` if no other refresh holds it (the
        indexer, which also sees them then), and keep in the pending list those it may
        still miss."""
        directories = sorted(set(directories))
        try:
            if self.store.write_lock_free():
                storemod.Writer(self.store).refresh(directories, verify=False)
        except (sqlite3.Error, OSError) as exc:
            log.warning("cannot update the index %s (%s): the indexer will", self.store.path, exc)
        pending = []
        for directory in directories:
            found = self._found(directory)
            held = self.catalog.fingerprint(directory)
            if (found.fingerprint if found is not None else None) != held:
                pending.append(directory)
        self.pending = pending
        self._write_pending(pending)

    def _read_pending(self) -> list[str]:
        try:
            text = self.pending_path.read_text(encoding="utf-8", errors="surrogateescape")
        except FileNotFoundError:
            return []
        return [line for line in text.splitlines() if line]

    def _write_pending(self, directories: list[str]) -> None:
        if not directories:
            self.pending_path.unlink(missing_ok=True)
            return
        temp = self.pending_path.with_name(PENDING_FILE + ".new")
        temp.write_text(
            "".join(f"{d}\n" for d in directories), encoding="utf-8", errors="surrogateescape"
        )
        os.replace(temp, self.pending_path)

    def changed(self, directories: Iterable[str]) -> None:
        """After a deposit or deletion: its directories, for the index and the next command.
        The change is made by then: a failure here is only logged (the indexer catches up)."""
        directories = list(directories)
        for directory in directories:  # read again when asked next (a batch goes on)
            self.read.pop(directory, None)
        if self.catalog is None:
            return
        try:
            self._refresh([*self.pending, *directories])
        except (sqlite3.Error, OSError) as exc:
            log.warning(
                "cannot note the change in the index %s or in %s (%s): the indexer's "
                "next rescan will find it",
                self.store.path,
                self.pending_path,
                exc,
            )

    # -- items, as on disk now -------------------------------------------------------------

    def _found(self, directory: str) -> walkmod.Found | None:
        """`directory` as the index's walk finds it, if it is an item directory."""
        # The first the walk yields: an item, or the first item below a directory that is none.
        found = next(walkmod.Walk(self.root).items(directory), None)
        return found if found is not None and found.directory == directory else None

    def _item(self, directory: str) -> Item | None:
        """The item in `directory` as its files are now (None: not a readable item)."""
        if directory not in self.read:
            found = self._found(directory)
            item = None
            if found is not None and found.valid():
                record = recordsmod.read_item(self.root, found).record
                item = recordsmod.decode(directory, record) if record is not None else None
            self.read[directory] = item
        return self.read[directory]

    def lookup(self, text: str | Ibi) -> Item | None:
        """The item served for the IBI `text` (as `items.Catalog.lookup`), with the
        translations other items declare towards it."""
        if self.scanned is not None:
            return self.scanned.lookup(text)
        k = ibimod.key(str(text))
        named = [str(text)] if ibimod.is_valid(str(text)) else []  # perhaps not indexed yet
        item = next((i for i in self._claiming(k, named) if self._served(i)), None)
        if item is None:
            return None
        keys = set(item.keys())
        for directory in sorted(
            {*self.catalog.referrers(keys), *self.pending}, key=walkmod.sortkey
        ):
            other = self._item(directory)
            if (
                other is not None
                and other is not item
                and other.language
                and any(ibimod.key(ref.text) in keys for ref in other.translations.values())
            ):
                item.translations.setdefault(other.language, other.name)
        return item

    def _claiming(self, k: str, more: Iterable[str] = ()) -> list[Item]:
        """The items claiming the IBI key `k` as their files are now, in claim order: those the
        index names, those deposited since, and the directories `more`."""
        candidates = [*self.catalog.claimants(k), *self.pending, *more]
        claiming = [
            item
            for item in map(self._item, dict.fromkeys(candidates))
            if item is not None and k in item.keys()
        ]
        return sorted(claiming, key=lambda i: claim(walkmod.sortkey(i.directory)))

    def _served(self, item: Item) -> bool:
        """Whether `item` is served, by the claim rule both catalogs follow."""
        return is_served(
            walkmod.sortkey(item.directory),
            item.keys(),
            lambda k, mine: [
                key
                for other in self._claiming(k)
                if claim(key := walkmod.sortkey(other.directory)) < mine
            ],
            lambda key: (
                (other := self._item(directory_of(key))) is not None and self._served(other)
            ),
        )

    def referrers(self, item: Item) -> Iterator[Item]:
        """Every item that may name `item` in a relation (a superset, as looked up now)."""
        if self.scanned is not None:
            yield from self.scanned.by_directory.values()
            return
        directories = {*self.catalog.referrers(item.keys()), *self.pending}
        # A translation it declares puts it among the other item's translations too.
        directories |= {
            other.directory
            for ref in item.translations.values()
            if (other := self.lookup(ref)) is not None
        }
        for directory in sorted(directories, key=walkmod.sortkey):
            other = self._item(directory)
            if other is not None and self.lookup(other.name) is other:  # served
                yield other


@contextmanager
def open_holdings(config: Mapping[str, Any]) -> Iterator[Holdings]:
    holdings = Holdings(config)
    try:
        yield holdings
    finally:
        holdings.close()


@contextmanager
def batch(config: Mapping[str, Any]) -> Iterator[Holdings | None]:
    """The deposit lock and one `Holdings` for several deposits and revisions in a row (an
    import's): pass it as their `holdings`. Each still brings the index up to date for what
    it changed. Keep a batch short (other deposits wait for the lock); without a complete
    index it yields None, and each call reads the collection as usual."""
    with (
        locked(config["state_dir"], config.get("database") or ""),
        open_holdings(config) as holdings,
    ):
        yield holdings if holdings.scanned is None else None


@contextmanager
def locked_holdings(config: Mapping[str, Any], holdings: Holdings | None) -> Iterator[Holdings]:
    if holdings is not None:  # the caller holds the lock (batch)
        yield holdings
        return
    with locked(config["state_dir"], config.get("database") or ""), open_holdings(config) as made:
        yield made


def held(catalog: Holdings, text: str, option: str) -> items.Item:
    try:
        ibimod.parse(text)
    except ibimod.IbiError as exc:
        raise DepositError(f"{option} {text}: {exc}") from None
    item = catalog.lookup(text)
    if item is None:
        raise DepositError(
            f"{option} {text}: no item of this collection ({catalog.root}) has "
            "this IBI; a relation is recorded only between items held here"
        )
    if item.state == "Deleted":
        raise DepositError(f"{option} {text}: {item.directory} is Deleted")
    return item


def last_held_edition(catalog: Holdings, item: items.Item) -> items.Item:
    return items.follow_editions(catalog.lookup, item).last


def related_name(catalog: Holdings, text: str) -> str:
    """The IBI a relation to a held item is written with: the form its directory is named by."""
    item = catalog.lookup(text)
    return item.name.text if item is not None else text
