"""The import mapping: which IBI each source's record became (issue 21), so that a re-run
mints nothing twice. One row per (source, source id): the IBI, the fingerprint of what was
applied (only its files' part, after a ':', while its item is being made: a crash then leaves
a row, never an item nobody knows, and a re-run does not copy the files again), and whether
it was turned into a tombstone.

SQLite in `state_dir/imports.sqlite` by default; PostgreSQL when `database` is set (the
`imports` component of common/postgres.py's SCHEMA), so every node of one Archive sees it.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..common import db

FILE = "imports.sqlite"


@dataclass(frozen=True)
class Mapped:
    ibi: str
    fingerprint: str
    deleted: bool


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


class PostgresMapping:
    def __init__(self, url: str):
        self.url = url

    def load(self, source: str, ids: Collection[str] | None = None) -> dict[str, Mapped]:
        from ..common import postgres

        query = "SELECT source_id, ibi, fingerprint, deleted FROM import_map WHERE source = %s"
        with postgres.transaction(self.url) as conn:
            if ids is None:
                rows = conn.execute(query, (source,)).fetchall()
            else:
                rows = conn.execute(f"{query} AND source_id = ANY(%s)", (source, list(ids)))
                rows = rows.fetchall()
        return {sid: Mapped(ibi, fp, deleted) for sid, ibi, fp, deleted in rows}

    def put(self, source: str, source_id: str, mapped: Mapped) -> None:
        from ..common import postgres

        with postgres.autocommit(self.url) as conn:
            conn.execute(
                "INSERT INTO import_map VALUES (%s, %s, %s, %s, %s) "
                "ON CONFLICT (source, source_id) DO UPDATE SET ibi = excluded.ibi, "
                "fingerprint = excluded.fingerprint, deleted = excluded.deleted",
                (source, source_id, mapped.ibi, mapped.fingerprint, mapped.deleted),
            )

    def close(self) -> None:
        pass


def open_mapping(config: Mapping[str, Any]) -> SqliteMapping | PostgresMapping:
    """The mapping of the Archive `config` describes (its `database`, else its state_dir)."""
    if config.get("database"):
        return PostgresMapping(config["database"])
    try:
        return SqliteMapping(config["state_dir"])
    except sqlite3.Error as exc:
        raise OSError(f"cannot open {Path(config['state_dir']) / FILE}: {exc}") from None
