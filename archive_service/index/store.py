"""The persistent index: one SQLite database (WAL mode) per collection, in the state directory.

One writer at a time (a file lock) keeps it equal to the collection; every worker reads it
with cheap indexed look-ups, so a worker's memory does not grow with the collection. The
collection stays the source of truth. Each item row carries a fingerprint of what the item is
built from (size and modification time of `item.yaml` and of every file under `doc/`); a
refresh walks the collection in the database's key order beside the stored rows and re-reads
only items whose fingerprint changed. So an unchanged collection costs a directory walk, an
interrupted build resumes where it stopped, and nothing a crash leaves behind is trusted
beyond what the next walk confirms.

What spans items is resolved when read, not when written, so one item's change never has to
rewrite others: which of two directories claiming one IBI is served (the claim rule of
protocol/catalog.py, which the in-memory catalog follows too: the directory named by the
repository name before an IBIp directory, then the first in collection order), and
translations declared only on the other side.
"""

from __future__ import annotations

import fcntl
import hashlib
import logging
import mmap
import os
import re
import secrets
import sqlite3
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ..common import changes, db
from ..common.progress import duration, figures
from . import oai, search
from .records import _Row, claim
from .walk import SEP, Walk, cover, estimate_items, sortkey

if TYPE_CHECKING:
    from .readers import _Readers

log = logging.getLogger(__name__)

# Bump when a record's shape or what index.load_item derives changes: old indexes are rebuilt.
SCHEMA = "10"  # 6: the kinds and conflicts tables (issue 18); 7: location (issue 21); 8: no
# target named with a backslash; 9: OAI-PMH's table (index/oai.py, kept across rebuilds);
# 10: the search tables of index/search.py (issue 34)
BATCH_ITEMS = 1000
BATCH_SECONDS = 1.0
PROGRESS_SECONDS = 5.0
PARALLEL_ITEMS = 2000  # a first build of at least this many items reads in several processes
# ... and from this many on, several processes also walk the tree: on a cold page cache that
# keeps the disk busy (100,000 items here: 35 s -> 22 s); below it the tree is likely cached,
# where one walker feeding the readers costs less CPU (10,000 items: 1.2 s against 1.4 s).
PARALLEL_WALK_ITEMS = 20000

_TABLES = (
    """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT) WITHOUT ROWID;
-- One row per item directory. record is the Item as JSON (NULL: its sidecar is unusable);
-- keys/refs/langs repeat what the side tables hold for it, so a rewrite can undo them.
CREATE TABLE items (
    sortkey TEXT PRIMARY KEY,
    fingerprint TEXT NOT NULL,
    record TEXT,
    problems TEXT,
    keys TEXT NOT NULL DEFAULT '',
    refs TEXT NOT NULL DEFAULT '',
    langs TEXT NOT NULL DEFAULT ''
);
CREATE INDEX items_with_problems ON items(sortkey) WHERE problems IS NOT NULL;
-- Both IBI forms of every readable item, lower-cased (several rows for one key: a conflict);
-- claim orders the claimants for the claim rule (protocol/catalog.py claim, is_served).
CREATE TABLE keys (key TEXT NOT NULL, claim TEXT NOT NULL, PRIMARY KEY (key, claim)) WITHOUT ROWID;
-- The keys above with more than one claimant, kept as each batch touches them: finding them
-- by grouping the whole keys table took 0.9 s at 1,000,000 items, on every page that counts.
CREATE TABLE conflicts (key TEXT PRIMARY KEY) WITHOUT ROWID;
-- Translations each item declares, by the key of the IBI they name (for the reverse side);
-- its nextedition and metadata as 'n:<key>' and 'm:<key>' (what `delete` says still names it).
CREATE TABLE refs (ref TEXT NOT NULL, sortkey TEXT NOT NULL, PRIMARY KEY (ref, sortkey))
    WITHOUT ROWID;
-- How many items hold or declare each language: the Archive's relation set (§7.2).
CREATE TABLE langs (lang TEXT PRIMARY KEY, n INTEGER NOT NULL) WITHOUT ROWID;
-- How many readable items have each state and contenttype: the Archive's page counts them
-- without reading 1,000,000 records.
CREATE TABLE kinds (
    state TEXT NOT NULL,
    contenttype TEXT NOT NULL,
    n INTEGER NOT NULL,
    PRIMARY KEY (state, contenttype)
) WITHOUT ROWID;
"""
    + oai.TABLES
)


# Each committing transaction of a writer moves the index to its next generation, a number the
# readers read inside their snapshot: the key of the caches the threads of a worker share
# (PRAGMA data_version cannot be: each connection counts its own). A new index file starts
# from a random one, so two files never share a generation.
_NEXT_GENERATION = (
    "INSERT INTO meta VALUES ('generation', ?) ON CONFLICT (key) "
    "DO UPDATE SET value = CAST(value AS INTEGER) + 1"
)


def next_generation(conn: sqlite3.Connection) -> None:
    """In a write transaction: its commit makes the index's next generation."""
    conn.execute(_NEXT_GENERATION, (str(secrets.randbits(62)),))


# ------------------------------------------------------------------------------- store

# SQLite's primary result codes: SQLITE_ERROR, SQLITE_IOERR, SQLITE_CORRUPT, SQLITE_NOTADB
_ERROR, _IOERR, _CORRUPT, _NOTADB = 1, 10, 11, 26


def is_damage(exc: BaseException) -> bool:
    """Whether an SQLite error says the index file is damaged ('database disk image is
    malformed', 'file is not a database'), or is no longer the file its WAL belongs to
    ('disk I/O error': the WAL removed under it) or no index at all ('no such table': the
    file emptied, or removed and opened anew): not busy, full or read-only, which pass."""
    if not isinstance(exc, sqlite3.DatabaseError):
        return False
    code = getattr(exc, "sqlite_errorcode", 0) & 0xFF
    return code in (_IOERR, _CORRUPT, _NOTADB) or (
        code == _ERROR and str(exc).startswith("no such table")
    )


class Damaged(Exception):
    """The index file is damaged: rebuild it from the collection."""


class Store:
    """Where one collection's index lives: `<state_dir>/index/<name>-<hash>.sqlite3`, keyed
    by the collection's real path, with the two lock files beside it."""

    def __init__(self, collection: str | os.PathLike, state_dir: str | os.PathLike):
        self.root = Path(os.path.abspath(collection))
        self.real_root = os.path.realpath(self.root)
        digest = hashlib.sha256(os.fsencode(self.real_root)).hexdigest()[:16]
        name = re.sub(r"[^A-Za-z0-9._-]+", "_", self.root.name or "root")[:40]
        self.state_dir = Path(os.path.abspath(state_dir))
        self.path = self.state_dir / "index" / f"{name}-{digest}.sqlite3"

    def __repr__(self) -> str:
        return f"Store({str(self.root)!r} -> {str(self.path)!r})"

    def exists(self) -> bool:
        return self.path.is_file()

    def connect(self, *, readonly: bool = False) -> sqlite3.Connection:
        """A connection in autocommit mode (transactions are explicit)."""
        if not readonly:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        conn = db.connect(self.path, timeout=30)
        if readonly:
            conn.execute("PRAGMA query_only = 1")
        else:
            db.use_wal(conn)  # the transactions a power loss takes, the next walk repairs
        return conn

    def _lock_path(self, which: str) -> str:
        return f"{self.path}.{which}.lock"

    # -- damage ------------------------------------------------------------------------
    # A reader that meets a damaged index says so in `<index>.damaged`, with the inode of
    # the file it read, and the next writer rebuilds the index (the indexer looks every
    # second); a report about a file already replaced is dropped.

    @property
    def damage_path(self) -> str:
        return f"{self.path}.damaged"

    def inode(self) -> int | None:
        try:
            return os.stat(self.path).st_ino
        except OSError:
            return None

    def report_damage(self, inode: int | None, why: str) -> None:
        try:
            with open(self.damage_path, "x", encoding="utf-8") as f:
                f.write(f"{inode} {why}\n")
        except OSError:
            pass  # already reported (or nowhere to say it: the next start's check finds it)

    def reported_damage(self) -> str | None:
        """Why a reader found the index file as it is now damaged, or None."""
        try:
            with open(self.damage_path, encoding="utf-8", errors="replace") as f:
                inode, _, why = f.read().strip().partition(" ")
        except OSError:
            return None
        if inode != str(self.inode()):
            self._forget_damage()
            return None
        return why or "a reader found it damaged"

    def _forget_damage(self) -> None:
        try:
            os.unlink(self.damage_path)
        except OSError:
            pass

    def damage(self) -> str | None:
        """What is wrong with the index file: a reader's report, else the first fault PRAGMA
        quick_check finds (it reads every page: 0.06 s at 100,000 items, 0.7 s at 1,000,000,
        from the page cache). None: sound, or no index yet."""
        if not self.exists():
            return None
        reported = self.reported_damage()
        if reported is not None:
            return reported
        try:
            conn = db.connect(self.path, timeout=30)
            try:
                rows = conn.execute("PRAGMA quick_check(1)").fetchall()
            finally:
                conn.close()
        except sqlite3.Error as exc:
            return str(exc) if is_damage(exc) else None
        return None if rows == [("ok",)] else " ".join(str(rows[0][0]).split())  # one line

    def replace_with(self, other: Store) -> bool:
        """Put the index `other` built (closed, its WAL checkpointed away) at this path. The
        damaged file is kept beside it as `<index>.bad` (one, the latest) for whoever wants
        to know what happened; its WAL and shared memory go: they belong to it alone.
        Whether there was a file to keep."""
        kept = True
        try:
            os.replace(self.path, f"{self.path}.bad")
        except FileNotFoundError:
            kept = False  # removed under us
        for suffix in ("-wal", "-shm"):
            try:
                os.unlink(f"{self.path}{suffix}")
            except FileNotFoundError:
                pass
        os.replace(other.path, self.path)
        for leftover in (other._lock_path("write"), other.changes_path):
            try:
                os.unlink(leftover)
            except FileNotFoundError:
                pass
        self._forget_damage()
        self.note_change()
        return kept

    # After each refresh the writer touches `<index>.refreshed`: when the index was last
    # brought up to date, for the Archive's page and /health, without a write to the index
    # (which would make every worker drop what it kept).
    @property
    def refreshed_path(self) -> str:
        return f"{self.path}.refreshed"

    def note_refreshed(self) -> None:
        try:
            with open(self.refreshed_path, "w"):
                pass
        except OSError:
            pass  # then the pages show an older time: true of what they can know

    def refreshed(self) -> float | None:
        """When a refresh last ended (seconds since the epoch), or None if unknown."""
        try:
            return os.stat(self.refreshed_path).st_mtime
        except OSError:
            return None

    # Every commit also bumps a counter in `<index>.changes` that readers map into memory:
    # reading it costs no system call, where PRAGMA data_version takes the WAL's locks.
    @property
    def changes_path(self) -> str:
        return f"{self.path}.changes"

    def note_change(self) -> None:
        """After a commit (under the write lock): tell the readers the index changed.
        If that fails they still see the commit within catalog._Reader.READ_EVERY seconds."""
        if (exc := changes.bump(self.changes_path)) is not None:
            log.warning(
                "cannot write %s (%s): workers see changes up to a second later",
                self.changes_path,
                exc.strerror,
            )

    def map_changes(self) -> mmap.mmap | None:
        """The counter note_change bumps, mapped read-only; None if there is none yet."""
        return changes.mapped(self.changes_path)

    @contextmanager
    def write_lock(self) -> Iterator[None]:
        """Only one refresh at a time, across processes (a flock, released if we die)."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self._lock_path("write"), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)  # closing the last descriptor releases the lock

    def try_watch_lock(self) -> int | None:
        """The lock that makes one process the indexer: its descriptor, or None if taken."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self._lock_path("watch"), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return None
        return fd

    def meta(self) -> dict[str, str]:
        """The index's own facts (schema, complete, dirs, ...); {} when there is none."""
        if not self.exists():
            return {}
        conn = self.connect(readonly=True)
        try:
            return dict(conn.execute("SELECT key, value FROM meta"))
        except sqlite3.Error:
            return {}
        finally:
            conn.close()

    def is_complete(self) -> bool:
        """A full walk has finished at least once (the index holds the whole collection), and
        a writer would keep the index rather than rebuild it."""
        meta = self.meta()
        return (
            meta.get("schema") == SCHEMA
            and meta.get("complete") == "1"
            and meta.get("collection") == self.real_root
        )

    def write_lock_free(self) -> bool:
        """Whether no refresh holds the write lock right now (for a caller that must not
        wait behind a long one, as `deposit` must not behind the indexer's full rescan)."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self._lock_path("write"), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        finally:
            os.close(fd)
        return True


# ------------------------------------------------------------------------------ writer


@dataclass
class Refreshed:
    """What one refresh did."""

    walked: int = 0
    read: int = 0
    removed: int = 0
    dirs: int = 0
    seconds: float = 0.0

    def __str__(self) -> str:
        return (
            f"{self.walked} items walked, {self.read} read, {self.removed} removed "
            f"in {self.seconds:.2f} s"
        )


Shown = bool | Callable[[int, int | None], object]  # log progress, or show it to a function


class Progress:
    """A long refresh's progress: a log line every few seconds (items done, rate, time left),
    or, given a function (`index` on a terminal: common/progress.py `Bar`), every step to it."""

    def __init__(self, root: Path, total: int, shown: Shown):
        self.root, self.total = root, total
        self.enabled, self.shown = bool(shown), shown if callable(shown) else None
        self.started = self.last = time.monotonic()

    def step(self, done: int) -> None:
        if self.shown is not None:
            self.shown(done, max(self.total, done))
            return
        if not self.enabled:
            return
        now = time.monotonic()
        if now - self.last < PROGRESS_SECONDS:
            return
        self.last = now
        rate, left = figures(done, self.total, self.started, now)
        log.info(
            "indexing %s: %d of about %d items (%.0f items/s, about %s left)",
            self.root,
            done,
            max(self.total, done),
            rate,
            duration(left),
        )


class Writer:
    """Brings the index in line with the collection: everything, or some scopes of it."""

    def __init__(self, store: Store, *, log_problems: bool = False):
        self.store = store
        self.log_problems = log_problems

    def refresh(
        self,
        scopes: Iterable[str] | None = None,
        *,
        progress: Shown = False,
        verify: bool | None = None,
    ) -> Refreshed:
        """Walk `scopes` (default: the whole collection) and rewrite what changed.

        Changes are committed in batches, each item's rows in one transaction with it. With
        `verify` (default: for a full refresh) the index file is checked first (Store.damage);
        a damaged one, found then or by any refresh, is rebuilt from the collection."""
        try:
            result = self._refresh(
                scopes, progress=progress, verify=scopes is None if verify is None else verify
            )
        except Damaged as exc:
            result = self.rebuild(str(exc), progress=progress)
        except sqlite3.DatabaseError as exc:
            if not is_damage(exc):
                raise
            result = self.rebuild(str(exc), progress=progress)
        self.store.note_refreshed()
        return result

    def rebuild(self, why: str, *, progress: Shown = False) -> Refreshed:
        """Build the index anew from the collection beside the damaged one, then put it in
        its place: readers keep what they can read of the old one until then, and never see
        a half-built one. Writers wait (the write lock is held throughout)."""
        store = self.store
        log.error(
            "the index %s is damaged (%s); rebuilding it from the collection", store.path, why
        )
        started = time.monotonic()
        with store.write_lock():
            fresh = Store(store.root, store.state_dir)
            fresh.path = store.path.with_name(store.path.name + ".rebuild")
            for suffix in ("", "-wal", "-shm"):  # what an interrupted rebuild left
                Path(f"{fresh.path}{suffix}").unlink(missing_ok=True)
            result = Writer(fresh, log_problems=self.log_problems)._refresh(
                None, progress=progress, verify=False
            )
            kept = store.replace_with(fresh)
        result.seconds = time.monotonic() - started
        log.info(
            "rebuilt the index %s from the collection: %s%s",
            store.path,
            result,
            f"; the damaged file is {store.path}.bad" if kept else "",
        )
        return result

    def _refresh(self, scopes: Iterable[str] | None, *, progress: Shown, verify: bool) -> Refreshed:
        full = scopes is None
        scopes = [""] if full else cover(scopes)
        result = Refreshed()
        if not scopes:
            return result
        if not os.path.isdir(self.store.root):
            raise FileNotFoundError(f"collection {self.store.root} is not a directory")
        started = time.monotonic()
        with self.store.write_lock():
            if verify and (why := self.store.damage()) is not None:
                raise Damaged(why)
            conn = self.store.connect()
            try:
                cold = self._prepare(conn)
                total = 0
                if progress:
                    total = (
                        estimate_items(self.store.root)
                        if cold
                        else conn.execute("SELECT count(*) FROM items").fetchone()[0]
                    )
                meter = Progress(self.store.root, total, progress)
                batch = _Batch(conn, self.store)
                walk = Walk(self.store.root)
                size = (total or estimate_items(self.store.root)) if cold else 0
                big = size >= PARALLEL_ITEMS
                if (
                    size >= PARALLEL_WALK_ITEMS
                    and full
                    and conn.execute("SELECT 1 FROM items LIMIT 1").fetchone() is None
                ):
                    # A first build of a big collection: walking and parsing are most of it,
                    # and with several reads in flight the disk answers sooner.
                    self._build_in_parallel(batch, walk, result, meter)
                else:
                    # An interrupted first build resumes here, parsing in other processes:
                    # one per CPU, as this one walks and writes more than it reads.
                    from .readers import _cpus, _Readers  # a reader of the index needs none

                    readers = _Readers(self.store.root, _cpus() if big else 0)
                    try:
                        for scope in scopes:
                            self._merge(conn, batch, walk, scope, result, meter, readers)
                        for ready, new in readers.drain():
                            self._write(batch, ready, new=new)
                    finally:
                        readers.close()
                result.dirs = walk.dirs
                if full:
                    # Only what changed: any write makes every worker drop what it kept.
                    done = {"complete": "1", "dirs": str(walk.dirs)}
                    meta = dict(conn.execute("SELECT key, value FROM meta"))
                    if any(meta.get(key) != value for key, value in done.items()):
                        batch.begin().executemany(
                            "INSERT OR REPLACE INTO meta VALUES (?, ?)", done.items()
                        )
                    if cold:
                        batch.commit()  # the items' rows first
                        oai.sweep(batch.begin())
                batch.commit()
            finally:
                conn.close()
        result.seconds = time.monotonic() - started
        return result

    def _prepare(self, conn: sqlite3.Connection) -> bool:
        """Create (or recreate, when made by another schema) the tables; True if empty."""
        try:
            meta = dict(conn.execute("SELECT key, value FROM meta"))
        except sqlite3.OperationalError:
            meta = {}
        if meta.get("schema") == SCHEMA and meta.get("collection") == self.store.real_root:
            if "generation" not in meta:  # written by an earlier version: readers need one
                conn.execute("BEGIN IMMEDIATE")
                next_generation(conn)
                conn.execute("COMMIT")
                self.store.note_change()
            return meta.get("complete") != "1"
        if meta:
            log.info("rebuilding the index %s (made by another version)", self.store.path)
        conn.execute("BEGIN IMMEDIATE")
        for (name,) in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table'"
        ).fetchall():
            if not oai.kept(name):
                conn.execute(f'DROP TABLE IF EXISTS "{name}"')  # FTS5's go with theirs
        for statement in (_TABLES + search.TABLES).split(";"):
            if statement.strip():
                conn.execute(statement)
        conn.executemany(
            "INSERT INTO meta VALUES (?, ?)",
            [("schema", SCHEMA), ("collection", self.store.real_root), ("complete", "0")],
        )
        next_generation(conn)
        conn.execute("COMMIT")
        self.store.note_change()
        return True

    def _build_in_parallel(
        self, batch: _Batch, walk: Walk, result: Refreshed, meter: Progress
    ) -> None:
        """Fill an empty index: processes walk and read scopes of the collection; this one
        writes their rows as they come (the order of rows does not matter to the store)."""
        from .readers import _Readers, _walkers

        walkers = _Readers(self.store.root, _walkers())
        log.info(
            "first build of %s: %d processes walk and read it", self.store.root, len(walkers.procs)
        )
        try:
            for rows, dirs in walkers.walk(walk.scopes()):
                walk.dirs += dirs
                for row in rows:
                    self._write(batch, row, new=True)
                result.read += len(rows)
                result.walked += len(rows)
                meter.step(result.walked)
        finally:
            walkers.close()

    @staticmethod
    def _stored(conn: sqlite3.Connection, scope: str) -> Iterator[tuple[str, str]]:
        """(sortkey, fingerprint) of the stored items in `scope`, in key order, page by page
        (rows are only ever written at or behind the walk, so paging stays consistent)."""
        if scope:
            low = sortkey(scope)
            where = "(sortkey = ? OR (sortkey > ? AND sortkey < ?))"
            args = [low, low + SEP, low + "\x02"]
        else:
            where, args = "1", []
        last = ""
        while True:
            rows = conn.execute(
                f"SELECT sortkey, fingerprint FROM items WHERE {where} AND sortkey > ? "
                "ORDER BY sortkey LIMIT 1000",
                args + [last],
            ).fetchall()
            if not rows:
                return
            yield from rows
            last = rows[-1][0]

    def _merge(
        self,
        conn,
        batch: _Batch,
        walk: Walk,
        scope: str,
        result: Refreshed,
        meter: Progress,
        readers: _Readers,
    ) -> None:
        disk = walk.items(scope)
        stored = self._stored(conn, scope)
        found = next(disk, None)
        row = next(stored, None)
        while found is not None or row is not None:
            if row is None or (found is not None and found.sortkey < row[0]):
                if not found.valid():  # not an item after all
                    found = next(disk, None)
                    continue
                for ready, new in readers.read(found, new=True):
                    self._write(batch, ready, new=new)
                result.read += 1
            elif found is None or found.sortkey > row[0]:
                self._remove(batch, row[0])
                result.removed += 1
                row = next(stored, None)
                continue
            else:
                if found.fingerprint != row[1] and found.valid():
                    for ready, new in readers.read(found, new=False):
                        self._write(batch, ready, new=new)
                    result.read += 1
                row = next(stored, None)
            result.walked += 1
            meter.step(result.walked)
            found = next(disk, None)

    @staticmethod
    def _undo(batch: _Batch, key: str) -> None:
        """Take back what the stored row of `key` put in the side tables."""
        conn = batch.conn
        old = conn.execute(
            "SELECT keys, refs, langs, json_extract(record, '$.state'), "
            "json_extract(record, '$.contenttype') FROM items WHERE sortkey = ?",
            (key,),
        ).fetchone()
        if old is None:
            return
        keys, refs, langs = (x.split(" ") if x else [] for x in old[:3])
        batch.touched.update(keys)
        if old[3] is not None:
            batch.kinds[old[3:]] = batch.kinds.get(old[3:], 0) - 1
        conn.executemany(
            "DELETE FROM keys WHERE key = ? AND claim = ?", [(k, claim(key)) for k in keys]
        )
        conn.executemany("DELETE FROM refs WHERE ref = ? AND sortkey = ?", [(r, key) for r in refs])
        for lang in langs:
            batch.langs[lang] = batch.langs.get(lang, 0) - 1

    def _remove(self, batch: _Batch, key: str) -> None:
        batch.begin()
        self._undo(batch, key)
        search.note_removed(batch.conn, key)
        batch.conn.execute("DELETE FROM items WHERE sortkey = ?", (key,))
        oai.note_removed(batch.conn, key)
        batch.done()

    def _write(self, batch: _Batch, row: _Row, *, new: bool) -> None:
        if self.log_problems:
            for problem in row.problems:
                log.warning("%s", problem)
        key = row.sortkey
        batch.begin()
        if not new:
            self._undo(batch, key)
        search.note_written(batch.conn, key, row.record)
        batch.items.append(
            (
                key,
                row.fingerprint,
                row.record,
                row.problems_json,
                " ".join(row.keys),
                " ".join(row.refs),
                " ".join(row.langs),
            )
        )
        oai.note_written(batch.conn, key, row.record)
        batch.keys += [(k, claim(key)) for k in row.keys]
        batch.touched.update(row.keys)
        batch.refs += [(r, key) for r in row.refs]
        for lang in row.langs:
            batch.langs[lang] = batch.langs.get(lang, 0) + 1
        if row.kind is not None:
            batch.kinds[row.kind] = batch.kinds.get(row.kind, 0) + 1
        batch.done()


class _Batch:
    """One write transaction spanning many items, committed every so many items or seconds.

    New rows wait here and go in with one statement per table at commit."""

    def __init__(self, conn: sqlite3.Connection, store: Store):
        self.conn = conn
        self.store = store
        self.count = 0
        self.opened = 0.0
        self.items: list[tuple] = []
        self.keys: list[tuple[str, str]] = []
        self.refs: list[tuple[str, str]] = []
        self.langs: dict[str, int] = {}
        self.kinds: dict[tuple[str, str], int] = {}
        self.touched: set[str] = set()  # keys claimed or given up in this transaction

    def begin(self) -> sqlite3.Connection:
        if not self.conn.in_transaction:
            self.conn.execute("BEGIN IMMEDIATE")
            self.count, self.opened = 0, time.monotonic()
        return self.conn

    def done(self) -> None:
        self.count += 1
        if self.count >= BATCH_ITEMS or time.monotonic() - self.opened >= BATCH_SECONDS:
            self.commit()

    def commit(self) -> None:
        if not self.conn.in_transaction:
            return
        conn = self.conn
        conn.executemany(
            "INSERT OR REPLACE INTO items (sortkey, fingerprint, record, problems, keys, refs, "
            "langs) VALUES (?, ?, ?, ?, ?, ?, ?)",
            self.items,
        )
        conn.executemany("INSERT OR IGNORE INTO keys VALUES (?, ?)", self.keys)
        touched = [(k,) for k in self.touched]
        conn.executemany("DELETE FROM conflicts WHERE key = ?", touched)
        conn.executemany(
            "INSERT INTO conflicts SELECT key FROM keys WHERE key = ? GROUP BY key "
            "HAVING count(*) > 1",
            touched,
        )
        conn.executemany("INSERT OR IGNORE INTO refs VALUES (?, ?)", self.refs)
        conn.executemany(
            "INSERT INTO langs VALUES (?, ?) ON CONFLICT (lang) DO UPDATE SET n = n + excluded.n",
            [kv for kv in self.langs.items() if kv[1]],
        )
        if any(n < 0 for n in self.langs.values()):
            conn.execute("DELETE FROM langs WHERE n <= 0")
        conn.executemany(
            "INSERT INTO kinds VALUES (?, ?, ?) ON CONFLICT (state, contenttype) "
            "DO UPDATE SET n = n + excluded.n",
            [(*kind, n) for kind, n in self.kinds.items() if n],
        )
        if any(n < 0 for n in self.kinds.values()):
            conn.execute("DELETE FROM kinds WHERE n <= 0")
        self.items, self.keys, self.refs, self.langs, self.kinds = [], [], [], {}, {}
        self.touched = set()
        next_generation(conn)
        conn.execute("COMMIT")
        self.store.note_change()
