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
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from ..common import changes, db
from . import oai

if TYPE_CHECKING:
    pass

log = logging.getLogger(__name__)

# Bump when a record's shape or what index.load_item derives changes: old indexes are rebuilt.
SCHEMA = "10"  # 6: the kinds and conflicts tables (issue 18); 7: location (issue 21); 8: no
# target named with a backslash; 9: OAI-PMH's table (index/oai.py, kept across rebuilds);
# 10: the search tables of index/search.py (issue 34)
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


# The writer's own module; its names here too, where callers have always found them.
from .writer import Progress, Refreshed, Writer, _Batch  # noqa: E402, F401
