"""The import mapping in the PostgreSQL database every node shares (`import_map`)."""

from __future__ import annotations

from collections.abc import Collection

from . import Mapped


class PostgresMapping:
    def __init__(self, url: str):
        self.url = url

    def load(self, source: str, ids: Collection[str] | None = None) -> dict[str, Mapped]:
        from ...common import postgres

        query = "SELECT source_id, ibi, fingerprint, deleted FROM import_map WHERE source = %s"
        with postgres.transaction(self.url) as conn:
            if ids is None:
                rows = conn.execute(query, (source,)).fetchall()
            else:
                rows = conn.execute(f"{query} AND source_id = ANY(%s)", (source, list(ids)))
                rows = rows.fetchall()
        return {sid: Mapped(ibi, fp, deleted) for sid, ibi, fp, deleted in rows}

    def put(self, source: str, source_id: str, mapped: Mapped) -> None:
        from ...common import postgres

        with postgres.autocommit(self.url) as conn:
            conn.execute(
                "INSERT INTO import_map VALUES (%s, %s, %s, %s, %s) "
                "ON CONFLICT (source, source_id) DO UPDATE SET ibi = excluded.ibi, "
                "fingerprint = excluded.fingerprint, deleted = excluded.deleted",
                (source, source_id, mapped.ibi, mapped.fingerprint, mapped.deleted),
            )

    def close(self) -> None:
        pass
