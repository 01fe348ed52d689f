"""The import mapping: which IBI each source's record became (issue 21), so that a re-run
mints nothing twice. One row per (source, source id): the IBI, the fingerprint of what was
applied (only its files' part, after a ':', while its item is being made: a crash then leaves
a row, never an item nobody knows, and a re-run does not copy the files again), and whether
it was turned into a tombstone.

Two stores, one module each: `sqlite.SqliteMapping` (`state_dir/imports.sqlite`, the
default) and `postgres.PostgresMapping` (the `imports` component of common/postgres.py's
SCHEMA), so every node of one Archive sees it; `open_mapping` picks.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any, Protocol


@dataclass(frozen=True)
class Mapped:
    ibi: str
    fingerprint: str
    deleted: bool


class ImportMapping(Protocol):
    def load(self, source: str, ids: Collection[str] | None = None) -> dict[str, Mapped]:
        """The rows of `source` (only those of `ids` when given: a streamed import's batch)."""

    def put(self, source: str, source_id: str, mapped: Mapped) -> None:
        """Keep (insert or replace) the row of (`source`, `source_id`)."""

    def close(self) -> None: ...


def open_mapping(config: Mapping[str, Any]) -> ImportMapping:
    """The mapping of the Archive `config` describes (its `database`, else its state_dir)."""
    if config.get("database"):
        from .postgres import PostgresMapping

        return PostgresMapping(config["database"])
    from .sqlite import open_sqlite

    return open_sqlite(config["state_dir"])
