"""Putting a new item into the collection, and taking one out as Deleted (SPEC §7, issue 5).

deposit: mint an IBI, build the whole item — `doc/` and `item.yaml` — in a dot-named
temporary directory of the collection (the index walker skips dot-directories, so a deposit
cut short leaves nothing an index can see), then rename it into place in one step. Relations
(`nextedition`, `translations`) are written into the other item's sidecar through
`sidecar_update`, staged before the rename and committed right after it.

delete: the item stays, as a Deleted tombstone (state Deleted, timestamp = time of removal);
its files are moved from `doc/` to `.deleted-doc-<time>/` inside the item: nothing is
removed, and nothing under a Deleted item is served any longer (files are only served from
`doc/`; the web layer also refuses Deleted items).

Deposits and deletions hold `<state_dir>/deposit.lock`, so two of them never interleave
their reads and writes of the same sidecars. No Flask import.

What they need to know of the collection (which item holds an IBI, the last edition, who names
an item) comes from the persistent index (`store`), so its cost does not grow with the
collection: the index says which few directories to look at, and those are read from disk,
which is always current. What the index may not hold yet (the indexer is busy, or none runs)
is covered by `<state_dir>/deposit.pending`, the directories deposits changed since the index
last held them; after its change a deposit brings the index up to date for them itself if no
refresh holds the index's write lock. Without a complete index the first deposit builds it.
"""

from __future__ import annotations

import fcntl
import logging
import os
import secrets
import shutil
import sqlite3
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import yaml

from ..common import files as filesmod
from ..common.net import host_port, persistent_url
from ..common.yamlsafe import SafeLoader, dump_sidecar
from ..index import catalog as catalogmod
from ..index import records as recordsmod
from ..index import store as storemod
from ..index import walk as walkmod
from ..protocol import ibi as ibimod
from ..protocol import ibip as ibipmod
from ..protocol.catalog import claim, directory_of, is_served
from ..protocol.ibi import Ibi
from ..settings import DEFAULT_RESOLVER
from . import items as index
from . import mint as mintmod
from . import sidecar as sidecarmod
from . import sidecar_update
from .items import Item
from .sidecar import SIDECAR

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
    """The `index.Catalog` look-ups deposit and delete make, answered from the persistent
    index and the directories it names, read from disk (see the module docstring).

    Use under `locked()`: the pending list is read and written by one command at a time."""

    def __init__(self, config: Mapping[str, Any]):
        self.root = Path(config["collection"])
        self.state_dir = Path(config["state_dir"])
        self.store = storemod.Store(self.root, self.state_dir)
        self.pending_path = self.state_dir / PENDING_FILE
        self.read: dict[str, Item | None] = {}  # directory -> its item as on disk now
        self.scanned: index.Catalog | None = None
        self.catalog: catalogmod.StoreCatalog | None = None
        if not self.store.is_complete() and (why := self._build()) is not None:
            log.warning(
                "no complete index of %s in %s (%s): reading the whole collection instead",
                self.root,
                self.store.state_dir,
                why,
            )
            self.scanned = index.scan(self.root)
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
        """The item served for the IBI `text` (as `index.Catalog.lookup`), with the
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
def _holdings(config: Mapping[str, Any]) -> Iterator[Holdings]:
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
    with locked(config["state_dir"], config.get("database") or ""), _holdings(config) as holdings:
        yield holdings if holdings.scanned is None else None


@contextmanager
def _locked_holdings(config: Mapping[str, Any], holdings: Holdings | None) -> Iterator[Holdings]:
    if holdings is not None:  # the caller holds the lock (batch)
        yield holdings
        return
    with locked(config["state_dir"], config.get("database") or ""), _holdings(config) as made:
        yield made


# ---------------------------------------------------------------------------- deposit


@dataclass
class Deposited:
    directory: Path  # where the item now is
    minted: mintmod.Minted
    files: list[str]
    target: str | None
    linked: list[str] = field(default_factory=list)  # what changed in other items
    notes: list[str] = field(default_factory=list)

    @property
    def primary(self) -> str:
        return self.minted.rep or self.minted.ibip  # type: ignore[return-value]


def _sources(
    files: Sequence[str | os.PathLike[str]], location: str | None = None
) -> list[tuple[str, Path]]:
    if not files and location is None:
        raise DepositError("give at least one file to deposit, or the location of its content")
    sources: dict[str, Path] = {}
    for name in files:
        path = Path(name)
        if not path.is_file():
            raise DepositError(f"{path}: not a regular file")
        if not os.access(path, os.R_OK):
            raise DepositError(f"{path}: cannot be read")
        if index.UNSERVED.search(path.name):
            # It would be in doc/, never served nor listed: an item whose one file gets no URL.
            raise DepositError(
                f"{path}: its name holds a control character or a backslash, which is never "
                "served; rename it"
            )
        if path.name in sources:
            raise DepositError(
                f"two files are named {path.name!r} ({sources[path.name]} and "
                f"{path}); doc/ holds one file per name"
            )
        sources[path.name] = path
    return list(sources.items())


def _held(catalog: Holdings, text: str, option: str) -> index.Item:
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


def _last_held_edition(catalog: Holdings, item: index.Item) -> index.Item:
    return index.follow_editions(catalog.lookup, item).last


def _new_sidecar(data: Mapping[str, Any], when: datetime) -> str:
    text = f"# Deposited with archive-service deposit at {iso(when)}.\n" + dump_sidecar(data)
    # One the index would refuse (too large) must not be written: nothing could serve it.
    problem = sidecarmod.bounds_problem(text.encode("utf-8"))
    if problem is not None:
        raise DepositError(f"the new {SIDECAR} would be {problem}; nothing changed")
    sidecarmod.parse(
        yaml.load(text, Loader=SafeLoader), SIDECAR
    )  # what we write must read back valid
    return text


def _copy(source: Path, destination: Path, no_links: bool = False) -> None:
    if no_links:  # checked earlier by an import: no link swapped in since is followed
        try:
            fd = filesmod.open_no_links(source)
        except OSError as exc:
            raise DepositError(
                f"{source}: {exc.strerror} now (changed since it was checked?); not copied"
            ) from None
        with open(fd, "rb") as stream, open(destination, "xb") as written:
            shutil.copyfileobj(stream, written, 1 << 20)
    else:
        # copyfile, not copy2: the new file's mode follows the umask, not the upload's mode.
        shutil.copyfile(source, destination)
    with open(destination, "rb") as written:
        os.fsync(written.fileno())


def _make_temp_dir(collection: Path) -> Path:
    while True:
        path = collection / f"{TEMP_PREFIX}{secrets.token_hex(6)}"
        try:
            path.mkdir(mode=0o777)  # mode follows the umask (mkdtemp would give 0700)
            return path
        except FileExistsError:
            continue


def deposit(
    config: Mapping[str, Any],
    files: Sequence[str | os.PathLike[str]],
    *,
    target: str | None = None,
    language: str | None = None,
    title: str | None = None,
    nextedition_of: str | None = None,
    translation_of: str | None = None,
    granularity: Decimal | int | float | str = 1,
    now: Callable[[], Decimal | int | float] = time.time,
    sleep: Callable[[float], object] = time.sleep,
    before_rename: Callable[[Path], object] | None = None,
    location: str | None = None,
    extra: Mapping[str, Any] | None = None,
    on_minted: Callable[[str], object] | None = None,
    holdings: Holdings | None = None,
    no_links: bool = False,
) -> Deposited:
    """Mint an IBI and put `files` into the collection as a new item (see module docstring).

    `location`: the http(s) URL where the item's content lives (then `files` may be empty
    and the item has no doc/); `extra`: more sidecar keys (an import's dc, contenttype …);
    `on_minted(label)` is called with the new IBI before the item appears, so that a caller
    can record it first (an import's mapping: a crash then leaves no item it does not know);
    `holdings`: those of a `batch` the caller holds; `no_links`: refuse a file with a
    symbolic link anywhere on its path (files an import checked earlier).
    Raises DepositError (nothing changed) for bad input, a related IBI not held here, or an
    item already in the way. `before_rename(temp_dir)` is for tests of a cut-short deposit.
    """
    collection = Path(config["collection"])
    if not collection.is_dir():
        raise DepositError(f"collection {collection} is not a directory")
    if location is not None:
        try:
            location = sidecarmod.location_url(location)
        except ValueError as exc:
            raise DepositError(f"--location: {exc}") from None
    sources = _sources(files, location)
    names = [name for name, _ in sources]
    if target is not None:
        if target not in names:
            raise DepositError(
                f"--target {target!r} is not one of the files deposited ({', '.join(names)})"
            )
    if language is not None:
        try:
            language = sidecarmod.normalize_language(language)
        except ValueError as exc:
            raise DepositError(f"--language: {exc}") from None
    if title is not None and not title.strip():
        raise DepositError("--title is empty")
    if translation_of and not language:
        raise DepositError(
            "--translation-of needs --language: the other item lists its translations by language"
        )
    source = subsystem(config)
    form = source.form
    state_dir = config["state_dir"]

    with _locked_holdings(config, holdings) as catalog:
        changes: dict[str, dict[str, Any]] = {}  # other item's directory -> key -> value
        related: dict[str, index.Item] = {}
        notes: list[str] = []
        reverse_language = None
        if nextedition_of:
            old = _held(catalog, nextedition_of, "--nextedition-of")
            if old.nextedition is not None:
                last = _last_held_edition(catalog, old)
                hint = f"; the last edition held here is {last.name}" if last is not old else ""
                raise DepositError(
                    f"--nextedition-of {nextedition_of}: {old.directory} already "
                    f"has a next edition, {old.nextedition}{hint}"
                )
            related[old.directory] = old
            changes.setdefault(old.directory, {})["nextedition"] = None  # set after minting
        if translation_of:
            other = _held(catalog, translation_of, "--translation-of")
            if other.language == language:
                raise DepositError(
                    f"--translation-of {translation_of}: that item is in "
                    f"{language} too; a translation is in another language"
                )
            if language in other.translations:
                raise DepositError(
                    f"--translation-of {translation_of}: it already has a "
                    f"{language} translation, {other.translations[language]}"
                )
            related[other.directory] = other
            changes.setdefault(other.directory, {})["translations"] = None
            reverse_language = other.language
            if reverse_language is None:
                notes.append(
                    f"{other.directory} has no language, so the new item's sidecar "
                    f"cannot list it under translations; add 'language:' to "
                    f"{other.directory}/{SIDECAR} and the reverse entry will be derived"
                )
        for directory in related:
            sidecar_update.load(collection / directory / SIDECAR)  # refuse before minting

        minted = mintmod.mint(
            source.host,
            source.port,
            source.ip,
            form,
            state_dir=state_dir,
            granularity=granularity,
            now=now,
            sleep=sleep,
            database=config.get("database") or "",
        )
        for label in filter(None, (minted.rep, minted.ibip)):
            if catalog.lookup(label) is not None:
                raise DepositError(
                    f"the minted IBI {label} is already held by "
                    f"{catalog.lookup(label).directory}: was {state_dir} reset? "
                    "Nothing changed; deposit again"
                )
        primary = minted.rep or minted.ibip
        final = collection / primary
        if os.path.lexists(final):
            raise DepositError(f"{final} already exists; nothing changed")
        created = datetime.fromtimestamp(int(minted.time), UTC)

        data: dict[str, Any] = {}
        if minted.rep and minted.ibip:
            data["ibip"] = minted.ibip
        if language:
            data["language"] = language
        data["timestamp"] = iso(created)
        if location:
            data["location"] = location
        if target:
            data["target"] = target
        if translation_of and reverse_language:
            data["translations"] = {reverse_language: related_name(catalog, translation_of)}
        if title:
            dc: dict[str, Any] = {"title": title.strip()}
            if language:
                dc["language"] = language
            dc["date"] = created.strftime("%Y-%m-%d")
            identifier = persistent_url(config.get("resolver") or DEFAULT_RESOLVER, primary)
            if identifier:  # none without a resolver (`resolver: none`)
                dc["identifier"] = identifier
            data["dc"] = dc
        data.update(extra or {})
        sidecar_text = _new_sidecar(data, created)

        updates: list[sidecar_update.Update] = []
        linked: list[str] = []
        for directory, keys in changes.items():
            item = related[directory]
            new_values: dict[str, Any] = {}
            if "nextedition" in keys:
                new_values["nextedition"] = primary
                linked.append(f"{directory}: nextedition {primary}")
            if "translations" in keys:
                _, old_data = sidecar_update.load(collection / directory / SIDECAR)
                translations = dict(old_data.get("translations") or {})
                translations[language] = primary
                new_values["translations"] = translations
                linked.append(f"{directory}: translations {language}: {primary}")
                if reverse_language:
                    linked.append(f"{primary}: translations {reverse_language}: {item.name}")
            updates.append(sidecar_update.prepare(collection / directory / SIDECAR, new_values))

        temp = _make_temp_dir(collection)
        try:
            if sources:  # an item whose content lives at its location may have no doc/
                _fill_doc(temp / index.DOC, sources, no_links)
            filesmod.write_new(temp / SIDECAR, sidecar_text)
            filesmod.fsync_dir(temp)
            for update in updates:
                sidecar_update.stage(update)
            if before_rename is not None:
                before_rename(temp)
            if on_minted is not None:
                on_minted(primary)
            final.parent.mkdir(parents=True, exist_ok=True)
            # os.rename would silently replace an empty directory: look again, under the lock.
            if os.path.lexists(final):
                raise DepositError(f"{final} already exists; nothing changed")
            os.rename(temp, final)
        except BaseException as exc:
            shutil.rmtree(temp, ignore_errors=True)
            for update in updates:
                sidecar_update.discard(update)
            if isinstance(exc, OSError):
                # The collection full, a file unreadable: nothing is left of the item, say so
                # in one line (the command printed a traceback).
                raise DepositError(f"cannot build the item: {exc}; nothing changed") from exc
            raise
        filesmod.fsync_dir(final.parent)
        for update in updates:
            sidecar_update.commit(update)
            if not update.comments_kept:
                notes.append(
                    f"{update.path} was rewritten by PyYAML: its comments below the "
                    "top were not kept"
                )
        catalog.changed([primary, *changes])
    return Deposited(final, minted, names, target, linked, notes)


def _fill_doc(doc: Path, sources: Sequence[tuple[str, Path]], no_links: bool = False) -> None:
    doc.mkdir(mode=0o777)
    for name, path in sources:
        _copy(path, doc / name, no_links)
    filesmod.fsync_dir(doc)


def related_name(catalog: Holdings, text: str) -> str:
    """The IBI a relation to a held item is written with: the form its directory is named by."""
    item = catalog.lookup(text)
    return item.name.text if item is not None else text


# ----------------------------------------------------------------------------- revise


@dataclass
class Revised:
    directory: Path
    changed: bool  # False: the item already was as asked
    replaced_to: Path | None  # where the previous doc/ was put aside
    comments_kept: bool


def revise(
    config: Mapping[str, Any],
    label: str,
    *,
    changes: Mapping[str, Any] | None = None,
    removed: Iterable[str] = (),
    files: Sequence[str | os.PathLike[str]] | None = None,
    now: Callable[[], float] = time.time,
    holdings: Holdings | None = None,
    no_links: bool = False,
) -> Revised:
    """Change the item `label` in place, under the deposit lock: set the sidecar keys
    `changes`, take out the keys `removed`, and with `files` (a list, perhaps empty) give it
    a new doc/ holding them; the previous doc/ is moved to `.replaced-doc-<time>/` inside
    the item (nothing is removed, nothing under it is served). The timestamp becomes the
    time of the change. Nothing is written when the item already is as asked. `holdings`:
    those of a `batch` the caller holds; `no_links` as for `deposit`."""
    collection = Path(config["collection"])
    sources = _sources(files, "") if files else []
    with _locked_holdings(config, holdings) as catalog:
        item = catalog.lookup(label)
        if item is None:
            raise DepositError(f"{label}: no item of this collection ({collection}) has this IBI")
        if item.state == "Deleted":
            raise DepositError(f"{label}: {item.directory} is Deleted")
        directory = collection / item.directory
        path = directory / SIDECAR
        _, data = sidecar_update.load(path)
        changes = {k: v for k, v in (changes or {}).items() if data.get(k) != v}
        removed = [k for k in removed if k in data and k not in changes]
        if not changes and not removed and files is None:
            return Revised(directory, False, None, True)
        when = datetime.fromtimestamp(int(now()), UTC)
        changes["timestamp"] = iso(when)
        update = sidecar_update.prepare(path, changes, removed=removed)
        new_doc = moved_to = None
        try:
            if sources:
                new_doc = directory / f"{TEMP_PREFIX}doc-{secrets.token_hex(6)}"
                _fill_doc(new_doc, sources, no_links)
            sidecar_update.stage(update)
            doc = directory / index.DOC
            if files is not None and os.path.lexists(doc):
                moved_to = directory / f"{REPLACED_PREFIX}{when:%Y%m%dT%H%M%SZ}"
                while os.path.lexists(moved_to):
                    moved_to = moved_to.with_name(f"{moved_to.name}-{secrets.token_hex(2)}")
                os.rename(doc, moved_to)
            if new_doc is not None:
                os.rename(new_doc, doc)
                new_doc = None
            sidecar_update.commit(update)
        except BaseException:
            if new_doc is not None:
                shutil.rmtree(new_doc, ignore_errors=True)
            sidecar_update.discard(update)
            raise
        filesmod.fsync_dir(directory)
        catalog.changed([item.directory])
    return Revised(directory, True, moved_to, update.comments_kept)


# ----------------------------------------------------------------------------- delete


@dataclass
class Removed:
    directory: Path
    item: index.Item
    when: datetime
    moved_to: Path | None
    files: int
    comments_kept: bool
    referenced_by: list[str] = field(default_factory=list)


def delete(config: Mapping[str, Any], label: str, now: Callable[[], float] = time.time) -> Removed:
    """Turn the item `label` into a Deleted tombstone (see module docstring)."""
    try:
        ibimod.parse(label)
    except ibimod.IbiError as exc:
        raise DepositError(str(exc)) from None
    collection = Path(config["collection"])
    if not collection.is_dir():
        raise DepositError(f"collection {collection} is not a directory")
    with locked(config["state_dir"], config.get("database") or ""), _holdings(config) as catalog:
        item = catalog.lookup(label)
        if item is None:
            raise DepositError(f"{label}: no item of this collection ({collection}) has this IBI")
        if item.state == "Deleted":
            raise DepositError(
                f"{label}: {item.directory} is already Deleted (since {iso(item.timestamp)})"
            )
        when = datetime.fromtimestamp(int(now()), UTC)
        directory = collection / item.directory
        doc = directory / index.DOC
        moved_to = directory / f"{DELETED_PREFIX}{when:%Y%m%dT%H%M%SZ}" if doc.is_dir() else None
        if moved_to is not None and os.path.lexists(moved_to):
            raise DepositError(f"{moved_to} already exists; nothing changed")
        files = len(index.list_files(collection, item))
        kept = f"doc/ moved to {moved_to.name}/" if moved_to else "there was no doc/"
        note = (
            f"Deleted with archive-service delete at {iso(when)}; {kept}. "
            f"Timestamp before: {iso(item.timestamp)}; state before: {item.state}."
        )
        update = sidecar_update.prepare(
            directory / SIDECAR, {"state": "Deleted", "timestamp": iso(when)}, note
        )
        try:
            # The sidecar first: from this instant the item is Deleted and nothing of it is
            # served, so a crash before the move below leaves a consistent tombstone.
            sidecar_update.commit(update)
        finally:
            sidecar_update.discard(update)
        if moved_to is not None:
            os.rename(doc, moved_to)
            filesmod.fsync_dir(directory)
        referenced_by = []
        for other in catalog.referrers(item):
            refs = [("nextedition", other.nextedition), ("metadata", other.metadata)]
            refs += [(f"translations {lang}", ref) for lang, ref in other.translations.items()]
            for what, ref in refs:
                if ref is not None and other.directory != item.directory:
                    held = catalog.lookup(ref)
                    if held is not None and held.directory == item.directory:
                        referenced_by.append(f"{other.directory} ({what})")
        catalog.changed([item.directory])
    return Removed(
        directory, item, when, moved_to, files, update.comments_kept, sorted(set(referenced_by))
    )
