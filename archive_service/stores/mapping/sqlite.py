"""The import mapping in SQLite (the default): `state_dir/imports.sqlite`, WAL, durable."""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Collection
from pathlib import Path

from ...common import db
from . import Mapped

FILE = "imports.sqlite"


class SqliteMapping:
    def __init__(self, state_dir: str | os.PathLike[str]):
        Path(state_dir).mkdir(parents=True, exist_ok=True)
        self.conn = db.connect(Path(state_dir) / FILE, timeout=30)
        db.use_wal(self.conn, durable=True)  # a lost row would mint its record again
        self.conn.execute(
            "CREATE TABLE IF NOT EXISTS import_map (source TEXT NOT NULL, "
            "source_id TEXT NOT NULL, ibi TEXT NOT NULL, fingerprint TEXT NOT NULL, "
            "deleted INTEGER NOT NULL, PRIMARY KEY (source, source_id))"
        )

    def load(self, source: str, ids: Collection[str] | None = None) -> dict[str, Mapped]:
        """The rows of `source` (only those of `ids` when given: a streamed import's batch)."""
        query = "SELECT source_id, ibi, fingerprint, deleted FROM import_map WHERE source = ?"
        if ids is None:
            rows = self.conn.execute(query, (source,)).fetchall()
        else:
            ids, rows = list(ids), []
            for start in range(0, len(ids), 500):  # SQLite's bound on parameters
                part = ids[start : start + 500]
                marks = ", ".join("?" * len(part))
                rows += self.conn.execute(f"{query} AND source_id IN ({marks})", (source, *part))
        return {sid: Mapped(ibi, fp, bool(deleted)) for sid, ibi, fp, deleted in rows}

    def put(self, source: str, source_id: str, mapped: Mapped) -> None:
        self.conn.execute(
            "INSERT INTO import_map VALUES (?, ?, ?, ?, ?) ON CONFLICT (source, source_id) "
            "DO UPDATE SET ibi = excluded.ibi, fingerprint = excluded.fingerprint, "
            "deleted = excluded.deleted",
            (source, source_id, mapped.ibi, mapped.fingerprint, int(mapped.deleted)),
        )

    def close(self) -> None:
        self.conn.close()


def open_sqlite(state_dir: str | os.PathLike[str]) -> SqliteMapping:
    """The mapping in `state_dir`; one that cannot be opened is an OSError saying where."""
    try:
        return SqliteMapping(state_dir)
    except sqlite3.Error as exc:
        raise OSError(f"cannot open {Path(state_dir) / FILE}: {exc}") from None
