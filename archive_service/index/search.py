"""The item list's search: an SQLite FTS5 table of each item's IBI forms, dc titles and dates,
folded for case and accents (`unicode61 remove_diacritics 2`: `Relatorio` finds `RELATÓRIO`),
kept by the index writer (`note_written`, `note_removed`, in the item's own transaction) and
read a page at a time (`page_rows`) in collection order.

A word typed matches the words of an item that start with it (`relat` finds `Relatório`);
punctuation inside a word makes a phrase (`03.17`, `mtc-m18`, `2012-03` match those tokens
in a row); several words must all match, in any field. The user's text only ever reaches FTS5
inside quoted strings, so its query syntax (`"`, `*`, `NEAR(`, `-`, `OR`) is never read.
"""

from __future__ import annotations

import json
import sqlite3

# search_ids gives each item directory (sortkey) a stable FTS rowid: the items table's own rowid
# changes on every INSERT OR REPLACE. Statements are separated by ';' (store._prepare splits).
TABLES = """
CREATE TABLE search_ids (id INTEGER PRIMARY KEY, sortkey TEXT NOT NULL UNIQUE);
CREATE VIRTUAL TABLE search USING fts5(
    ibi, title, date, tokenize = 'unicode61 remove_diacritics 2'
);
"""


def _texts(record: str) -> tuple[str, str, str]:
    r = json.loads(record)
    dc = r.get("dc") or {}
    ibis = " ".join(f for f in (r.get("rep"), r.get("ibip")) if f)
    return ibis, "\n".join(dc.get("title", ())), "\n".join([r["timestamp"], *dc.get("date", ())])


def note_removed(conn: sqlite3.Connection, key: str) -> None:
    """In the writer's transaction: the item directory `key` is no longer searched."""
    row = conn.execute("SELECT id FROM search_ids WHERE sortkey = ?", (key,)).fetchone()
    if row is not None:
        conn.execute("DELETE FROM search WHERE rowid = ?", row)
        conn.execute("DELETE FROM search_ids WHERE id = ?", row)


def note_written(conn: sqlite3.Connection, key: str, record: str | None) -> None:
    """In the writer's transaction: the item directory `key` now holds `record` (None: its
    sidecar is unusable, nothing to search)."""
    note_removed(conn, key)
    if record is None:
        return
    rowid = conn.execute("INSERT INTO search_ids (sortkey) VALUES (?)", (key,)).lastrowid
    conn.execute(
        "INSERT INTO search (rowid, ibi, title, date) VALUES (?, ?, ?, ?)", (rowid, *_texts(record))
    )


def expression(text: str) -> str | None:
    """The FTS5 query for what a user typed: each whitespace-separated word a quoted string
    (its tokens a phrase, the last one a prefix), all of them required; None when no word
    holds a letter or digit (nothing to look for)."""
    # A lone surrogate cannot be bound; FTS5 reads a NUL as the end of the query.
    text = text.encode("utf-8", "replace").decode("utf-8").replace("\x00", " ")
    words = [w for w in text.split() if any(c.isalnum() for c in w)]
    if not words:
        return None
    return " AND ".join('"' + w.replace('"', '""') + '"*' for w in words)


def page_rows(
    conn: sqlite3.Connection, text: str, cursor: str, backward: bool, size: int, window: int
) -> tuple[list[tuple[str, str]], bool]:
    """(sortkey, record) of up to `size` + 1 readable items matching `text` beyond `cursor`
    in collection order (backward: before it, nearest first), and whether they came from a
    window of `window` items only (the caller then says where the next page resumes).

    A query matching at most `window` items is answered from its matches, sorted: a rare word
    is found at once anywhere in 1,000,000 items. One matching more is common: the items beyond
    the cursor are read in order, each checked against the index, as many as `window`."""
    query = expression(text)
    if query is None:
        return [], False
    op, order = ("<", "DESC") if backward else (">", "ASC")
    (found,) = conn.execute(
        "SELECT count(*) FROM (SELECT rowid FROM search WHERE search MATCH ? LIMIT ?)",
        (query, window + 1),
    ).fetchone()
    if found <= window:
        rows = conn.execute(
            "SELECT i.sortkey, i.record FROM search s CROSS JOIN search_ids d ON d.id = s.rowid "
            "CROSS JOIN items i ON i.sortkey = d.sortkey WHERE search MATCH ? "
            f"AND d.sortkey {op} ? AND i.record IS NOT NULL ORDER BY d.sortkey {order} LIMIT ?",
            (query, cursor, size + 1),
        ).fetchall()
        return rows, False
    rows = conn.execute(
        "SELECT sortkey, record FROM (SELECT sortkey, record FROM items WHERE record IS NOT NULL "
        f"AND sortkey {op} ? ORDER BY sortkey {order} LIMIT ?) AS w WHERE EXISTS (SELECT 1 FROM "
        "search_ids d CROSS JOIN search s ON s.rowid = d.id WHERE d.sortkey = w.sortkey "
        "AND search MATCH ?) LIMIT ?",
        (cursor, window, query, size + 1),
    ).fetchall()
    return rows, True
