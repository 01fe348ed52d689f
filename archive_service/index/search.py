"""The item list's search: an SQLite FTS5 table of each item's IBI forms, dc titles and dates,
folded for case and accents (`unicode61 remove_diacritics 2`: `Relatorio` finds `RELATÓRIO`),
kept by the index writer (`note_written`, `note_removed`, in the item's own transaction) and
read a page at a time (`page_rows`) in collection order.

A word typed matches the words of an item that start with it (`relat` finds `Relatório`);
punctuation inside a word makes a phrase (`03.17`, `mtc-m18`, `2012-03` match those tokens
in a row); several words must all match, in any field. Both the items' text and the user's
are folded here (`words`), and only folded letters and digits reach FTS5, quoted: its query
syntax (`"`, `*`, `NEAR(`, `-`, `OR`) is never read.
"""

from __future__ import annotations

import json
import re
import sqlite3
import unicodedata

# search_ids gives each item directory (sortkey) a stable FTS rowid: the items table's own rowid
# changes on every INSERT OR REPLACE. Statements are separated by ';' (store._prepare splits).
_WORD = re.compile(r"[^\W_]+")

TABLES = """
CREATE TABLE search_ids (id INTEGER PRIMARY KEY, sortkey TEXT NOT NULL UNIQUE);
CREATE VIRTUAL TABLE search USING fts5(
    ibi, title, date, tokenize = 'unicode61 remove_diacritics 2'
);
"""


def words(text: str) -> list[str]:
    """The words of `text` as both sides of the search see them: lower-cased, accents taken
    off (NFKD without its combining marks), split at whatever is not a letter or digit."""
    folded = unicodedata.normalize("NFKD", text.lower())
    return _WORD.findall("".join(c for c in folded if not unicodedata.combining(c)))


def _texts(record: str) -> tuple[str, str, str]:
    # Stored folded, so that a page that checks items one by one (page_rows) reads the same
    # words the FTS index holds.
    r = json.loads(record)
    dc = r.get("dc") or {}
    fields = (
        [f for f in (r.get("rep"), r.get("ibip")) if f],
        dc.get("title", ()),
        [r["timestamp"], *dc.get("date", ())],
    )
    return tuple(" ".join(w for value in field for w in words(value)) for field in fields)


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


# Words of a search read, at most: each costs FTS5 its own pass over the matches of its
# prefix, and the same word again costs as much again (issue 30's second pass: `1` typed 100
# times, 200 characters, held a page slot 2.6 s at 100,000 items, 770x a page, where `1` once
# took 49 ms). More words than this only narrow a search nobody types.
MAX_WORDS = 16


def phrases(text: str) -> list[str]:
    """What a user typed as phrases of folded words, one per whitespace-separated word
    holding a letter or digit (its last word a prefix), each once, MAX_WORDS words in all
    (a phrase cut there ends at a prefix: it finds what the whole did, and more). Only
    letters and digits are left: nothing of FTS5's query syntax (`"`, `*`, `NEAR(`, `-`,
    NUL) survives."""
    found: list[str] = []
    room = MAX_WORDS
    for typed in text.split():
        folded = words(typed)[:room]
        phrase = " ".join(folded)
        if phrase and phrase not in found:
            found.append(phrase)
            room -= len(folded)
            if room == 0:
                break
    return found


def page_rows(
    conn: sqlite3.Connection, text: str, cursor: str, backward: bool, size: int, window: int
) -> tuple[list[tuple[str, str]], bool]:
    """(sortkey, record) of up to `size` + 1 readable items matching `text` beyond `cursor`
    in collection order (backward: before it, nearest first), and whether they came from a
    window of `window` items only (the caller then says where the next page resumes).

    A query matching at most `window` items is answered from its matches, sorted: a rare word
    is found at once anywhere in 1,000,000 items. One matching more is common: the items beyond
    the cursor are read in order, each checked against the index, as many as `window`."""
    found = phrases(text)
    if not found:
        return [], False
    op, order = ("<", "DESC") if backward else (">", "ASC")
    query = " AND ".join(f'"{p}"*' for p in found)
    # The matches once (FTS5 order), not counted then matched again: a phrase of common
    # words costs FTS5 most of the page.
    ids = [
        i
        for (i,) in conn.execute(
            "SELECT rowid FROM search WHERE search MATCH ? LIMIT ?", (query, window + 1)
        )
    ]
    if len(ids) <= window:
        rows = conn.execute(
            "SELECT i.sortkey, i.record FROM search_ids d CROSS JOIN items i "
            "ON i.sortkey = d.sortkey WHERE d.id IN (SELECT value FROM json_each(?)) "
            f"AND d.sortkey {op} ? AND i.record IS NOT NULL ORDER BY d.sortkey {order} LIMIT ?",
            (json.dumps(ids), cursor, size + 1),
        ).fetchall()
        return rows, False
    # Each item of the window is checked against its stored words, not by a MATCH per item:
    # FTS5 expands a prefix anew for each (2 s a page for a common word at 1,000,000 items).
    columns = "(instr(' ' || s.ibi, ?N) OR instr(' ' || s.title, ?N) OR instr(' ' || s.date, ?N))"
    each = " AND ".join(columns.replace("?N", f"?{n}") for n in range(4, 4 + len(found)))
    rows = conn.execute(
        "SELECT sortkey, record FROM (SELECT sortkey, record FROM items WHERE record IS NOT NULL "
        f"AND sortkey {op} ?1 ORDER BY sortkey {order} LIMIT ?2) AS w WHERE EXISTS (SELECT 1 "
        "FROM search_ids d CROSS JOIN search s ON s.rowid = d.id WHERE d.sortkey = w.sortkey "
        f"AND {each}) LIMIT ?3",
        (cursor, window, size + 1, *(" " + p for p in found)),
    ).fetchall()
    return rows, True
