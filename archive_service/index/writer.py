"""The index's writer: a refresh (the walk beside the stored rows, re-reading only what
changed; a first build in parallel reading processes), a rebuild in place, and the write
transactions that keep the counts, the conflicts, OAI-PMH's rows and the search tables with
each item (`_Batch`). One writer at a time: `Store.write_lock`."""

from __future__ import annotations

import logging
import os
import sqlite3
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ..common.progress import duration, figures
from . import oai, search
from .records import _Row, claim
from .store import (
    _TABLES,
    SCHEMA,
    Damaged,
    Store,
    is_damage,
    next_generation,
)
from .walk import SEP, Walk, cover, estimate_items, sortkey

if TYPE_CHECKING:
    from .readers import _Readers

log = logging.getLogger("archive_service.index.store")  # the name its lines always had

BATCH_ITEMS = 1000
BATCH_SECONDS = 1.0
PROGRESS_SECONDS = 5.0
PARALLEL_ITEMS = 2000  # a first build of at least this many items reads in several processes
# ... and from this many on, several processes also walk the tree: on a cold page cache that
# keeps the disk busy (100,000 items here: 35 s -> 22 s); below it the tree is likely cached,
# where one walker feeding the readers costs less CPU (10,000 items: 1.2 s against 1.4 s).
PARALLEL_WALK_ITEMS = 20000


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
