"""The reader side of the index: `StoreCatalog` answers the questions of the
`protocol.catalog.Catalog` interface from the SQLite index with indexed look-ups, each
request reading one snapshot; the threads of a worker share what was read from one state of
the index (`_Generation`), and a damaged index is reported for the indexer to rebuild
(`Store.report_damage`)."""

from __future__ import annotations

import functools
import json
import logging
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TypeVar

from ..collection.items import Item, Problem, claim_problems
from ..common.processes import own_pid
from ..protocol import ibi as ibimod
from ..protocol.catalog import claimant, is_served
from ..protocol.ibi import Ibi
from . import search as searchmod
from .records import NO_LANGUAGE, _ibi, decode
from .store import Store, is_damage
from .walk import directory_of, sortkey

T = TypeVar("T")
# What a read of the index raises when it cannot be read (the health check reports it).
READ_ERRORS: tuple[type[Exception], ...] = (sqlite3.Error,)

log = logging.getLogger(__name__)


# ------------------------------------------------------------------------------ reader


_INHERITED: list = []


def _storable(text: str) -> bool:
    return text.isascii() and "\x00" not in text


class _Generation:
    """What was read from one state of the index (one file at one generation), shared by the
    threads of a process whose snapshots read that state. Its dicts are only read and written
    one key at a time (atomic under the GIL): threads that miss the same key at once both read
    it, from the same state, and one of the equal results stays."""

    def __init__(self, key: tuple):
        self.key = key
        self.answers: dict = {}
        self.forget_items()

    def forget_items(self) -> None:
        # New dicts, not cleared ones: a thread still reading the old ones is not disturbed.
        self.items: dict[str, Item | None] = {}
        self.rows: dict[str, tuple[str, str] | None] = {}
        self.served: dict[str, bool] = {}
        self.found: dict[str, str | None] = {}
        self.translates: dict[str, tuple[str | None, str]] = {}  # (language, name) by key
        self.summary: tuple[set[str], bool] | None = None
        self.count: int | None = None
        self.problem_count: int | None = None
        self.held = 0  # characters of the index records kept (rows and items), about

    def oversized(self, limit: int) -> bool:
        tables = (self.items, self.rows, self.served, self.found, self.translates)
        return max(map(len, tables)) > limit or self.held > HELD

    def keep(self, table: dict, key: str, value: T, size: int = 0) -> T:
        """`value` kept under `key` (the one already kept, if a thread was first), unless the
        key is longer than any item's: a requester chooses the IBI or path it names, up to
        the request line's 8 KB, and the bound above counts entries: 4,000 such requests took
        a worker from 39 to 72 MB, ~300 MB at the bound (issue 30, eighth adversarial pass).
        `size`: the characters of the record it comes from, counted towards HELD."""
        if len(key) > KEPT_KEY:
            return value
        kept = table.setdefault(key, value)
        if kept is value:
            self.held += size  # two threads may add at once: a measure, not an account
        return kept


_UNKNOWN = object()
# The longest IBI key or item directory the cache keeps (a repository name is some 40
# characters); a longer one is read from the index each time it is asked.
KEPT_KEY = 256
# And the characters of the index records it keeps, decoded or not, at most (then it starts
# afresh, as past CACHE entries): a record is some 300 characters, but a sidecar's 64 KiB of
# short dc values is 50,000 and, decoded, 0.6 MB, so landing pages of 200 such items (an
# import of a hostile provider's records, a depositor's) took a worker from 63 to 181 MB, and
# CACHE of them some 10 GB (issue 30, ninth adversarial pass). At most ~70 MB so.
HELD = 6_000_000


class _Reader:
    """One process's and thread's connection, and which state of the index it last read."""

    # Decoded items kept per worker, whatever its threads (about 2 KB each): a full answer
    # reads about 12, and a busy Archive answers for thousands of items in turn (bench: 1,000
    # answers ≈ 12,000).
    CACHE = 16384

    # Without news from the changes counter, the generation is still read this often (a
    # writer killed between its commit and the counter, a counter that cannot be written).
    READ_EVERY = 1.0

    def __init__(self, store: Store):
        self.pid = own_pid()
        self.store = store
        self.inode = store.inode()  # a rebuilt index is another file at the same path
        self.conn = store.connect(readonly=True)
        self.changes = store.map_changes()
        self.seen = b""  # the counter when the generation was last read
        self.read_at = 0.0
        self.key: tuple | None = None  # the state of the index last read (see state())
        self.gen: _Generation | None = None  # its cache, during a request
        self.private: _Generation | None = None  # see state()
        self.visiting: set[str] = set()  # the items _served is deciding in this thread
        self.in_request = False  # between begin() and end()
        self.snapshot = False  # a read transaction is open

    def state(self) -> tuple:
        """The key of the index's state this connection reads now: its file and generation.
        An index no writer of this version has committed to yet has no generation: then
        this connection's own data_version, and a cache of its own."""
        row = self.conn.execute("SELECT value FROM meta WHERE key = 'generation'").fetchone()
        if row is not None:
            return (self.inode, row[0])
        return (self.inode, None, id(self), self.conn.execute("PRAGMA data_version").fetchone()[0])

    def check(self) -> None:
        """Read the state of the index again if the indexer committed since (the changes
        counter moved) or every READ_EVERY seconds."""
        if self.changes is not None:
            seen, now = self.changes[:8], time.monotonic()
            if self.key is not None and seen == self.seen and now - self.read_at < self.READ_EVERY:
                return
            # Noted before the generation is read: a commit in between is seen next time.
            self.seen, self.read_at = seen, now
        now = self.store.inode()
        # None: the file was removed under us (the indexer rebuilds it); until then this
        # connection still reads it, where opening the path would make an empty index.
        if not self.conn.in_transaction and now not in (self.inode, None):
            self.conn.close()  # a damaged index was rebuilt: read the new file
            self.inode = now
            self.conn = self.store.connect(readonly=True)
        self.key = self.state()

    def start_snapshot(self) -> None:
        self.conn.execute("BEGIN")
        self.key = self.state()  # the snapshot starts here
        self.snapshot = True


def _reading(on_damage=None, *, snapshot: bool = False):
    """A StoreCatalog method that reports a damaged index (see Store.report_damage) and drops
    this thread's connection, then raises (the request fails until the index is rebuilt) or,
    given `on_damage`, returns on_damage(self, error). With `snapshot`, a call outside a
    request is a request of its own: what it caches for other threads is of one state."""

    def wrap(method):
        @functools.wraps(method)
        def read(self, *args, **kwargs):
            try:
                if snapshot and not self._in_request():
                    self.begin()
                    try:
                        return method(self, *args, **kwargs)
                    finally:
                        self.end()
                return method(self, *args, **kwargs)
            except sqlite3.DatabaseError as exc:
                if not is_damage(exc):
                    raise
                self._damaged(exc)
                if on_damage is None:
                    raise
                return on_damage(self, exc)

        return read

    return wrap


def _later(key: tuple, than: tuple) -> bool:
    """Whether the state `key` follows `than`, unless it is an earlier generation of the
    same file (readers only move on to a rebuilt file; a file that reuses the inode of
    the one it replaced starts from a random generation, far from its)."""
    try:
        return key[0] != than[0] or not 0 < int(than[1]) - int(key[1]) < 2**32
    except ValueError:
        return True


def _referring(conn: sqlite3.Connection, refs: list[str]) -> list[str]:
    """The item directories (sort keys, in order) whose sidecars name one of `refs` (the refs
    table: translations by key, 'n:'/'m:' for a next edition or a metadata item)."""
    marks = ",".join("?" * len(refs))
    query = f"SELECT DISTINCT sortkey FROM refs WHERE ref IN ({marks}) ORDER BY sortkey"
    return [key for (key,) in conn.execute(query, refs).fetchall()]


PAGE_SIZE = 50  # items on one page of the item list
# What one page of a search reads at most: a query's matches when it has no more (sorted), else
# the items after the cursor, each checked (see search.page_rows).
SEARCH_WINDOW = 20000


@dataclass(frozen=True)
class Page:
    """One page of the item list: its items, and the item directories the pages next to
    it start from (`after`: the next page, `before`: the previous one; None at an end)."""

    items: list[Item]
    after: str | None
    before: str | None


class StoreCatalog:
    """The `protocol.catalog.Catalog` interface protocol/answers.py uses, read from the store
    on demand (the in-memory implementation is `collection.items.Catalog`).

    Look-ups between `begin()` and `end()` (one web request) read one snapshot, so an answer
    never mixes two states of the index; outside them each call sees the latest commit.
    Each thread has its own connection; what they read is kept once per process, for the
    current state of the index only (see _Generation)."""

    def __init__(self, store: Store):
        self.store = store
        self.root = store.root
        self._local = threading.local()
        self._kept: _Generation | None = None  # the cache of the latest state read

    def _reader(self, check: bool = True) -> _Reader:
        reader = getattr(self._local, "reader", None)
        if reader is None or reader.pid != own_pid():
            if reader is not None:
                # A connection must not cross fork(): this process opens its own and leaves
                # the parent's alone (not even closed, which would act on the parent's files).
                _INHERITED.append(reader)
            reader = self._local.reader = _Reader(self.store)
        if check and not reader.snapshot and reader.in_request:
            reader.start_snapshot()
            if reader.gen is None or reader.gen.key != reader.key:
                reader.gen = self._cache(reader)  # committed since begin(): a newer state
        return reader

    def _in_request(self) -> bool:
        reader = getattr(self._local, "reader", None)
        return reader is not None and reader.pid == own_pid() and reader.in_request

    def _cache(self, reader: _Reader) -> _Generation:
        """The cache of the state `reader` reads: the process's, unless the state is older
        than the one kept (a request that began before a commit: then one of its own)."""
        key = reader.key
        if key[1] is None:
            if reader.private is None or reader.private.key != key:
                reader.private = _Generation(key)
            return reader.private
        kept = self._kept
        if kept is not None and kept.key == key:
            return kept
        cache = _Generation(key)
        if kept is None or kept.key[1] is None or _later(key, kept.key):
            self._kept = cache  # the previous one lives on only in the requests reading it
        return cache

    @_reading()
    def begin(self) -> None:
        """A request starts: its reads will share one snapshot of the index. The snapshot
        (a read transaction) is opened by the first read, so a request answered from
        `answer_cache()` costs no statement while the changes counter stays."""
        reader = self._reader(check=False)
        if reader.in_request:
            return
        reader.check()
        reader.gen = self._cache(reader)
        if reader.gen.oversized(reader.CACHE):
            reader.gen.forget_items()
        reader.in_request = True

    @_reading()
    def end(self) -> None:
        reader = getattr(self._local, "reader", None)
        if reader is not None and reader.pid == own_pid() and reader.in_request:
            reader.in_request = False
            reader.gen = None  # an idle thread keeps no state of the index alive
            if reader.snapshot:
                reader.snapshot = False
                reader.conn.execute("COMMIT")

    @_reading()
    def answer_cache(self) -> dict:
        """A dict for answers computed from the index as it is now (in a request: as its
        snapshot reads it), shared by this process's threads; a new, empty one once the
        indexer commits. Callers bound its size and serialize their writes."""
        reader = self._reader(check=False)
        if not reader.in_request:
            reader.check()
            return self._cache(reader).answers
        return reader.gen.answers

    def _damaged(self, exc: sqlite3.DatabaseError) -> None:
        reader = getattr(self._local, "reader", None)
        inode = reader.inode if reader is not None else self.store.inode()
        if not os.path.exists(self.store.damage_path):
            log.error(
                "the index %s is damaged (%s): asking for it to be rebuilt from the "
                "collection; what reads a damaged page fails until then",
                self.store.path,
                exc,
            )
        self.store.report_damage(inode, str(exc))
        if reader is not None and reader.pid == own_pid():
            try:
                reader.conn.close()
            except sqlite3.Error:
                pass
            self._local.reader = None

    def close(self) -> None:
        """Close this thread's connection (before a fork, or when done)."""
        reader = getattr(self._local, "reader", None)
        if reader is not None and reader.pid == own_pid():
            reader.conn.close()
        self._local.reader = None

    # -- the Catalog interface ---------------------------------------------------------

    @_reading(snapshot=True)
    def lookup(self, text: str | Ibi) -> Item | None:
        k = ibimod.key(str(text))
        if not _storable(k):
            return None
        reader = self._reader()
        key = reader.gen.found.get(k, _UNKNOWN)
        if key is _UNKNOWN:
            key = reader.gen.keep(
                reader.gen.found,
                k,
                next(
                    (
                        claimant(c)
                        for (c,) in reader.conn.execute(
                            "SELECT claim FROM keys WHERE key = ? ORDER BY claim", (k,)
                        )
                        if self._served(reader, claimant(c))
                    ),
                    None,
                ),
            )
        return self._item(reader, key) if key is not None else None

    @_reading(snapshot=True)
    def item_at(self, directory: str) -> Item | None:
        if not _storable(directory):
            return None  # from a URL, say; item directories are IBIs: ASCII, no NUL
        reader = self._reader()
        key = sortkey(directory)
        return self._item(reader, key) if self._served(reader, key) else None

    @_reading(snapshot=True)
    def read(self, query: Callable[[sqlite3.Connection], T]) -> T:
        """`query(connection)` on this request's snapshot (index/oai.py's reads)."""
        return query(self._reader().conn)

    @property
    def languages(self) -> set[str]:
        return self._summary()[0]

    @property
    def has_unlanguaged(self) -> bool:
        return self._summary()[1]

    @property
    @_reading(
        lambda self, exc: [
            Problem(
                str(self.store.path),
                f"the index is damaged ({exc}); it is being rebuilt from the collection",
            )
        ],
        snapshot=True,
    )
    def problems(self) -> list[Problem]:
        """Every item's problems, then the IBIs claimed by more than one directory."""
        reader = self._reader()
        found = []
        for (text,) in reader.conn.execute(
            "SELECT problems FROM items WHERE problems IS NOT NULL ORDER BY sortkey"
        ):
            found += [Problem(*p) for p in json.loads(text)]
        for k, claimants in reader.conn.execute(
            "SELECT c.key, group_concat(k.claim, ' ') FROM conflicts c CROSS JOIN keys k "
            "WHERE k.key = c.key GROUP BY c.key"
        ):
            found += claim_problems(k, map(claimant, claimants.split(" ")), self.lookup(k))
        return found

    @_reading(lambda self, exc: 1, snapshot=True)
    def problem_count(self) -> int:
        """How many problems `problems` lists, read once per state of the index: the Archive's
        page shows the number, and making the list at each view cost 17-20x the page with
        5,000 items of one problem each, growing with them (issue 30, eighth pass)."""
        reader = self._reader()
        if reader.gen.problem_count is None:
            reader.gen.problem_count = len(self.problems)
        return reader.gen.problem_count

    @_reading(lambda self, exc: 0, snapshot=True)
    def count(self) -> int:
        """How many items are served (read once per state of the index)."""
        reader = self._reader()
        count = reader.gen.count
        if count is None:
            # The readable items, as the kinds table counts them (see store.SCHEMA).
            readable = reader.conn.execute("SELECT coalesce(sum(n), 0) FROM kinds").fetchone()[0]
            # Items that lose every claim to an earlier directory are not served.
            later = reader.conn.execute(
                # CROSS JOIN keeps SQLite from walking all of keys first (0.2 s at 1,000,000).
                "SELECT DISTINCT k2.claim FROM conflicts c CROSS JOIN keys k1 CROSS JOIN keys k2 "
                "WHERE k1.key = c.key AND k2.key = c.key AND k1.claim < k2.claim"
            ).fetchall()
            count = reader.gen.count = readable - sum(
                1 for (c,) in later if not self._served(reader, claimant(c))
            )
        return count

    @_reading(snapshot=True)
    def kinds(self) -> dict[tuple[str, str], int]:
        """How many readable items have each (state, contenttype): a few rows of the kinds
        table the writer keeps, never a walk over the items."""
        return {
            (state, contenttype): n
            for state, contenttype, n in self._reader().conn.execute(
                "SELECT state, contenttype, n FROM kinds WHERE n > 0 ORDER BY state, contenttype"
            )
        }

    @_reading(snapshot=True)
    def page(self, *, after: str = "", before: str = "", search: str = "") -> Page:
        """One page of the served items in collection order, after the item directory
        `after` (or before `before`), those matching `search` only (see index/search.py).

        Keyset pagination on the primary key: each page costs the same at the millionth item
        as at the first. A search reads at most SEARCH_WINDOW rows per page, so a rare word
        costs a bounded time: a page may then hold fewer items (or none) and still go on."""
        reader = self._reader()
        backward = bool(before) and not after
        cursor = sortkey(before if backward else after)  # "": before every key
        op, order = ("<", "DESC") if backward else (">", "ASC")
        needle = search.strip()
        windowed = False
        if needle:
            rows, windowed = searchmod.page_rows(
                reader.conn, needle, cursor, backward, PAGE_SIZE, SEARCH_WINDOW
            )
        else:
            rows = reader.conn.execute(
                f"SELECT sortkey, record FROM items WHERE record IS NOT NULL "
                f"AND sortkey {op} ? ORDER BY sortkey {order} LIMIT ?",
                (cursor, PAGE_SIZE + 1),
            ).fetchall()
        more = len(rows) > PAGE_SIZE
        rows = rows[:PAGE_SIZE]
        # Where the next page starts: after the last item shown, or, when a search read its
        # whole window without filling the page, after the window's last row.
        resume = rows[-1][0] if rows else None
        if windowed and not more:
            edge = reader.conn.execute(
                f"SELECT sortkey FROM items WHERE record IS NOT NULL AND sortkey {op} ?"
                f" ORDER BY sortkey {order} LIMIT 1 OFFSET ?",
                (cursor, SEARCH_WINDOW - 1),
            ).fetchone()
            if edge is not None:
                more, resume = True, edge[0]
        items = [
            decode(directory_of(key), record) for key, record in rows if self._served(reader, key)
        ]
        # Onward (in the reading direction) from the last row read, `resume`; back toward
        # the cursor from the first item shown: that side has items whenever a cursor came.
        beyond = directory_of(resume) if more and resume else None
        if backward:
            items.reverse()
            return Page(items, after=items[-1].directory if items else None, before=beyond)
        first = items[0].directory if items and after else None
        return Page(items, after=beyond, before=first)

    @_reading(snapshot=True)
    def rows(self) -> int:
        """How many readable rows the index holds (served or not), for the sitemaps' split."""
        return (
            self._reader()
            .conn.execute("SELECT count(*) FROM items WHERE record IS NOT NULL")
            .fetchone()[0]
        )

    @_reading(snapshot=True)
    def directory_at(self, position: int) -> str | None:
        """The item directory of readable row `position` (0: the first) in collection order:
        where the sitemap that starts there starts (an index scan, no records read)."""
        row = (
            self._reader()
            .conn.execute(
                "SELECT sortkey FROM items WHERE record IS NOT NULL ORDER BY sortkey "
                "LIMIT 1 OFFSET ?",
                (position,),
            )
            .fetchone()
        )
        return directory_of(row[0]) if row else None

    @_reading(snapshot=True)
    def landing_rows(self, after: str, stop: str | None, limit: int) -> tuple[list, str | None]:
        """For the sitemaps: (directory, IBI, state, timestamp) of the served items after the
        directory `after` and before `stop`, in collection order, from at most `limit` rows,
        and the directory to go on after (None: no more). No record is decoded, and the claim
        rule runs only for items with a key in `conflicts` (the others are served)."""
        reader = self._reader()
        bound = " AND sortkey < ?" if stop is not None else ""
        rows = reader.conn.execute(
            "SELECT sortkey, keys, json_extract(record, '$.name'), json_extract(record, "
            "'$.state'), json_extract(record, '$.timestamp') FROM items WHERE record IS NOT "
            f"NULL AND sortkey > ?{bound} ORDER BY sortkey LIMIT ?",
            [sortkey(after), *([sortkey(stop)] if stop is not None else []), limit],
        ).fetchall()
        keys = list({k for row in rows for k in row[1].split()})
        conflicted = set()
        for start in range(0, len(keys), 500):
            chunk = keys[start : start + 500]
            conflicted.update(
                k
                for (k,) in reader.conn.execute(
                    f"SELECT key FROM conflicts WHERE key IN ({','.join('?' * len(chunk))})",
                    chunk,
                )
            )
        found = [
            (directory_of(key), name, state, timestamp)
            for key, keys_text, name, state, timestamp in rows
            if conflicted.isdisjoint(keys_text.split()) or self._served(reader, key)
        ]
        return found, directory_of(rows[-1][0]) if len(rows) == limit else None

    # -- resolution --------------------------------------------------------------------

    @_reading(snapshot=True)
    def _summary(self) -> tuple[set[str], bool]:
        reader = self._reader()
        summary = reader.gen.summary
        if summary is None:
            langs = {lang for (lang,) in reader.conn.execute("SELECT lang FROM langs WHERE n > 0")}
            summary = reader.gen.summary = (langs - {NO_LANGUAGE}, NO_LANGUAGE in langs)
        return summary

    def _row(self, reader: _Reader, key: str) -> tuple[str, str] | None:
        # _served and _item both need an item's row: read it once per state of the index.
        row = reader.gen.rows.get(key, _UNKNOWN)
        if row is _UNKNOWN:
            row = reader.conn.execute(
                "SELECT record, keys FROM items WHERE sortkey = ? AND record IS NOT NULL", (key,)
            ).fetchone()
            row = reader.gen.keep(reader.gen.rows, key, row, len(row[0]) if row else 0)
        return row

    def _served(self, reader: _Reader, key: str) -> bool:
        """Whether the item at `key` is served, by the claim rule (protocol.catalog.is_served),
        deciding the earlier claimants it meets on the way (kept per state of the index)."""
        served = reader.gen.served.get(key)
        if served is not None:
            return served
        if key in reader.visiting:
            return False  # a claim cycle cannot be served
        # Marked in this thread only: another one must not take "being decided" for "not served".
        reader.visiting.add(key)
        try:
            row = self._row(reader, key)
            served = row is not None and is_served(
                key,
                filter(None, row[1].split(" ")),
                lambda k, mine: (
                    other
                    for (other,) in reader.conn.execute(
                        "SELECT substr(claim, 2) FROM keys WHERE key = ? AND claim < ? "
                        "ORDER BY claim",
                        (k, mine),
                    )
                ),
                lambda other: self._served(reader, other),
            )
        finally:
            reader.visiting.discard(key)
        return reader.gen.keep(reader.gen.served, key, served)

    def _item(self, reader: _Reader, key: str) -> Item | None:
        item = reader.gen.items.get(key, _UNKNOWN)
        if item is not _UNKNOWN:
            return item
        row = self._row(reader, key)
        item = decode(directory_of(key), row[0]) if row else None
        if item is not None:
            # A translation declared on one side is a translation on both sides (Catalog.finish).
            for other in _referring(reader.conn, item.keys()):
                if other == key or not self._served(reader, other):
                    continue
                language, name = self._translates(reader, other)
                if language:
                    item.translations.setdefault(language, _ibi(name))
        # Two threads that missed together both decoded it: the first one kept is everyone's
        # (setdefault is one step under the GIL), so the worker holds one object per item.
        return reader.gen.keep(reader.gen.items, key, item, len(row[0]) if row else 0)

    def _translates(self, reader: _Reader, key: str) -> tuple[str | None, str]:
        # A referrer's language and name, decoded once per index state: its record may be
        # 64 KiB (1,700 translations), decoded again for each item it names (issue 30).
        facts = reader.gen.translates.get(key, _UNKNOWN)
        if facts is _UNKNOWN:
            source = json.loads(self._row(reader, key)[0])
            facts = reader.gen.keep(
                reader.gen.translates, key, (source.get("language"), source["name"])
            )
        return facts

    @_reading(snapshot=True)
    def relating(self) -> list[Item]:
        """The served items that name a next edition or a metadata item, in key order (what
        `check` follows: edition cycles, references of the wrong kind)."""
        reader = self._reader()
        keys = reader.conn.execute(
            "SELECT DISTINCT sortkey FROM refs WHERE (ref >= 'm:' AND ref < 'm;') "
            "OR (ref >= 'n:' AND ref < 'n;') ORDER BY sortkey"
        ).fetchall()
        return [self._item(reader, key) for (key,) in keys if self._served(reader, key)]

    @_reading(snapshot=True)
    def naming(self, item: Item, sidecar_key: str) -> list[Item]:
        """The served items whose `sidecar_key` (nextedition or metadata) names `item`, in key
        order: its previous editions, the items it is the Metadata item of (OAI-PMH's
        dc:relation gives both sides)."""
        prefix = {"nextedition": "n:", "metadata": "m:"}[sidecar_key]
        refs = [prefix + k for k in item.keys() if _storable(k)]
        if not refs:
            return []
        reader = self._reader()
        keys = _referring(reader.conn, refs)
        return [self._item(reader, key) for key in keys if self._served(reader, key)]

    # -- for deposit and delete: which directories to read from disk -----------------------

    @_reading()
    def claimants(self, text: str | Ibi) -> list[str]:
        """The directories that claim the IBI `text` (served or not), in claim order."""
        k = ibimod.key(str(text))
        if not _storable(k):
            return []
        return [
            directory_of(claimant(c))
            for (c,) in self._reader().conn.execute(
                "SELECT claim FROM keys WHERE key = ? ORDER BY claim", (k,)
            )
        ]

    @_reading()
    def referrers(self, keys: Iterable[str]) -> list[str]:
        """The directories whose item names one of `keys` (IBI keys) in its translations,
        nextedition or metadata, in key order."""
        refs = [r for k in keys if _storable(k) for r in (k, f"n:{k}", f"m:{k}")]
        if not refs:
            return []
        return [
            directory_of(key)
            for (key,) in self._reader().conn.execute(
                f"SELECT DISTINCT sortkey FROM refs WHERE ref IN ({','.join('?' * len(refs))}) "
                "ORDER BY sortkey",
                refs,
            )
        ]

    @_reading()
    def fingerprint(self, directory: str) -> str | None:
        """The fingerprint the index holds for `directory` (see Walk.found), or None."""
        if not _storable(directory):
            return None
        row = (
            self._reader()
            .conn.execute("SELECT fingerprint FROM items WHERE sortkey = ?", (sortkey(directory),))
            .fetchone()
        )
        return row[0] if row else None
