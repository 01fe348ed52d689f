"""What the index keeps for OAI-PMH (issue 33): one row per IBI ever held, with its datestamp
(UTC seconds of its last change), whether it is a deleted record, and the sets it is in.

The table outlives the rest of the index: a rebuild for a new `SCHEMA` keeps it (its name
carries its own version), so removed items stay deleted records and unchanged items keep
their datestamps (deletedRecord `persistent`). A row's datestamp moves only when the item's
record changes (a digest of it), or when it is removed, deleted or becomes unreadable.

Pages are keysets on (datestamp, key), per set on (set column, datestamp, key): each page
costs the same at the millionth row as at the first. No web framework here.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import time
from collections.abc import Iterator
from typing import NamedTuple

from ..protocol import ibi as ibimod

TABLE = "oai1"  # a new shape gets a new name: the rebuild then drops the old one
SET_COLUMNS = ("ct", "sub", "rep")  # contenttype; subdomain; subdomain/word

TABLES = f"""
CREATE TABLE IF NOT EXISTS {TABLE} (
    key TEXT PRIMARY KEY,
    ibi TEXT NOT NULL,
    sortkey TEXT,
    stamp INTEGER NOT NULL,
    deleted INTEGER NOT NULL,
    digest TEXT NOT NULL,
    ct TEXT,
    sub TEXT,
    rep TEXT
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS {TABLE}_stamp ON {TABLE}(stamp);
CREATE INDEX IF NOT EXISTS {TABLE}_ct ON {TABLE}(ct, stamp);
CREATE INDEX IF NOT EXISTS {TABLE}_sub ON {TABLE}(sub, stamp);
CREATE INDEX IF NOT EXISTS {TABLE}_rep ON {TABLE}(rep, stamp);
CREATE INDEX IF NOT EXISTS {TABLE}_dir ON {TABLE}(sortkey);
-- How many rows each set has ('' '': all of them): a list without dates is counted here, as
-- counting a million index entries took 0.2-0.5 s on every first page.
CREATE TABLE IF NOT EXISTS {TABLE}_counts (
    col TEXT NOT NULL,
    value TEXT NOT NULL,
    n INTEGER NOT NULL,
    PRIMARY KEY (col, value)
) WITHOUT ROWID;
"""


def kept(table: str) -> bool:
    """Whether a rebuild of the index keeps `table` (and its indexes)."""
    return table in (TABLE, f"{TABLE}_counts")


def identifier_ibi(record: dict) -> str:
    """The one IBI an item's OAI identifier carries: its repository name, else its IBIp."""
    return record.get("rep") or record.get("ibip") or record["name"]


def _sets(record: dict) -> tuple[str | None, str | None, str | None]:
    rep = record.get("rep")
    parts = rep.split("/") if rep else []
    return (
        record.get("contenttype"),
        parts[0] if parts else None,
        "/".join(parts[:2]) if parts else None,
    )


_UPSERT = f"""
INSERT INTO {TABLE} (key, ibi, sortkey, stamp, deleted, digest, ct, sub, rep)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (key) DO UPDATE SET ibi = excluded.ibi, sortkey = excluded.sortkey,
    stamp = excluded.stamp, deleted = excluded.deleted, digest = excluded.digest,
    ct = excluded.ct, sub = excluded.sub, rep = excluded.rep
WHERE {TABLE}.digest != excluded.digest OR {TABLE}.deleted != excluded.deleted
    OR {TABLE}.sortkey IS NOT excluded.sortkey
"""


def now() -> int:
    return int(time.time())


def note_written(conn: sqlite3.Connection, sortkey: str, record: str | None) -> None:
    """In the writer's transaction: the item directory `sortkey` now reads as `record` (None:
    unreadable, so not served: a deleted record until it reads again)."""
    if record is None:
        note_removed(conn, sortkey)
        return
    r = json.loads(record)
    ibi = identifier_ibi(r)
    digest = hashlib.sha256(record.encode("utf-8", "surrogateescape")).hexdigest()[:24]
    deleted = 1 if r.get("state") == "Deleted" else 0
    key, sets = ibimod.key(ibi), _sets(r)
    old = conn.execute(f"SELECT ct, sub, rep FROM {TABLE} WHERE key = ?", (key,)).fetchone()
    if old is None or tuple(old) != sets:
        _count(conn, old, -1)
        _count(conn, sets, +1)
    conn.execute(_UPSERT, (key, ibi, sortkey, now(), deleted, digest, *sets))


def _count(conn: sqlite3.Connection, sets: tuple | None, step: int) -> None:
    if sets is None:
        return
    pairs = [("", "")] + [(c, v) for c, v in zip(SET_COLUMNS, sets, strict=True) if v is not None]
    conn.executemany(
        f"INSERT INTO {TABLE}_counts VALUES (?, ?, ?) ON CONFLICT (col, value) "
        "DO UPDATE SET n = n + excluded.n",
        [(c, v, step) for c, v in pairs],
    )


def note_removed(conn: sqlite3.Connection, sortkey: str) -> None:
    """In the writer's transaction: the item directory `sortkey` is gone (or unreadable)."""
    conn.execute(
        f"UPDATE {TABLE} SET deleted = 1, stamp = ?, sortkey = NULL WHERE sortkey = ?",
        (now(), sortkey),
    )


def sweep(conn: sqlite3.Connection) -> None:
    """After a first build (the items table made anew): rows of directories it did not find
    were removed meanwhile."""
    conn.execute(
        f"UPDATE {TABLE} SET deleted = 1, stamp = ?, sortkey = NULL WHERE sortkey IS NOT NULL "
        f"AND NOT EXISTS (SELECT 1 FROM items WHERE items.sortkey = {TABLE}.sortkey "
        "AND items.record IS NOT NULL)",
        (now(),),
    )


# ------------------------------------------------------------------------------ reading


class Header(NamedTuple):
    key: str
    ibi: str
    stamp: int
    deleted: bool
    sets: tuple[str | None, str | None, str | None]  # ct, sub, rep
    directory: str | None = None  # the item directory's sortkey (None once removed)
    record: str | None = None  # its record (index/records.py), when read with the page


FOREVER = 2**62  # an `until` that bounds nothing


class Selection(NamedTuple):
    """What a list request selects: an optional set column and value, a datestamp range."""

    column: str | None = None
    value: str | None = None
    since: int = 0
    until: int = FOREVER


def _where(sel: Selection, since: bool = True) -> tuple[str, list]:
    if sel.column is not None and sel.column not in SET_COLUMNS:
        raise ValueError(f"no set column {sel.column!r}")
    where, args = "stamp <= ?", [sel.until]
    if since:
        where, args = f"stamp >= ? AND {where}", [sel.since, *args]
    if sel.column:
        where, args = f"{sel.column} = ? AND {where}", [sel.value, *args]
    return where, args


_COLUMNS = "key, ibi, stamp, deleted, ct, sub, rep, sortkey"


def _header(row) -> Header:
    return Header(row[0], row[1], row[2], bool(row[3]), (row[4], row[5], row[6]), *row[7:])


def page(
    conn: sqlite3.Connection,
    sel: Selection,
    after: tuple[int, str],
    size: int,
    *,
    records: bool = False,
) -> list[Header]:
    """Up to `size` headers of `sel` after the position (datestamp, key), in that order;
    with `records`, each with its item's record (one join, not a look-up per record).

    The position is the one lower bound the query has (no `stamp >= since` beside it, which
    SQLite may prefer, reading every row from `since` on: a page's time grew with its
    place in the list)."""
    after = max(after, (sel.since, ""))
    where, args = _where(sel, since=False)
    sql = (
        f"SELECT {_COLUMNS} FROM {TABLE} WHERE {where} AND (stamp, key) > (?, ?) "
        "ORDER BY stamp, key LIMIT ?"
    )
    if records:
        sql = (
            f"SELECT p.*, i.record FROM ({sql}) p LEFT JOIN items i "
            "ON i.sortkey = p.sortkey AND NOT p.deleted"
        )
    rows = conn.execute(sql, [*args, *after, size]).fetchall()
    rows.sort(key=lambda row: (row[2], row[0]))  # a page, here: not a sort in SQLite
    return [_header(row) for row in rows]


# A dated list's rows counted at most (some 10 ms): past it, its size is not given.
MAX_COUNTED = 10_000


def count(conn: sqlite3.Connection, sel: Selection) -> int | None:
    """How many rows `sel` lists (a list's first page gives it once, its tokens carry it), or
    None when that is not cheap to know (completeListSize is optional). Without dates, or
    with dates around every row of its set, from the counts the writer keeps; else by
    counting the range, up to MAX_COUNTED rows (an incremental harvest's range is small;
    counting a million rows cost 0.7 s, loaded)."""
    where, args = _where(sel._replace(since=0, until=FOREVER))
    # Each alone: SQLite reads one end of the index for a lone min() or max(), not for both.
    first, last = (
        conn.execute(f"SELECT {end}(stamp) FROM {TABLE} WHERE {where}", args).fetchone()[0]
        for end in ("min", "max")
    )
    if first is None or (sel.since <= first and sel.until >= last):
        row = conn.execute(
            f"SELECT n FROM {TABLE}_counts WHERE col = ? AND value = ?",
            (sel.column or "", sel.value or ""),
        ).fetchone()
        return row[0] if row else 0
    where, args = _where(sel)
    n = conn.execute(
        f"SELECT count(*) FROM (SELECT 1 FROM {TABLE} WHERE {where} LIMIT ?)",
        [*args, MAX_COUNTED + 1],
    ).fetchone()[0]
    return n if n <= MAX_COUNTED else None


def header(conn: sqlite3.Connection, ibi: str) -> Header | None:
    row = conn.execute(
        f"SELECT {_COLUMNS} FROM {TABLE} WHERE key = ?", (ibimod.key(ibi),)
    ).fetchone()
    return _header(row) if row else None


def earliest(conn: sqlite3.Connection) -> int | None:
    return conn.execute(f"SELECT min(stamp) FROM {TABLE}").fetchone()[0]


def set_values(conn: sqlite3.Connection, column: str, after: str = "") -> Iterator[str]:
    """The distinct values of a set column past `after`, in order, each found through the
    index (a skip scan: as many look-ups as sets, not a read of every row)."""
    if column not in SET_COLUMNS:
        raise ValueError(f"no set column {column!r}")
    last = after
    while True:
        row = conn.execute(
            f"SELECT min({column}) FROM {TABLE} WHERE {column} > ?", (last,)
        ).fetchone()
        if row[0] is None:
            return
        last = row[0]
        yield last


def exists(conn: sqlite3.Connection, column: str, value: str) -> bool:
    if column not in SET_COLUMNS:
        raise ValueError(f"no set column {column!r}")
    sql = f"SELECT 1 FROM {TABLE} WHERE {column} = ? LIMIT 1"
    return conn.execute(sql, (value,)).fetchone() is not None
