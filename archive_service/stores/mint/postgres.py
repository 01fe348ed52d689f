"""The mint distributor's state for nodes sharing the PostgreSQL `database` (the setting):
the last date per prefix in table `mint_last`, so two nodes minting for one archiveaddress
never hand out the same label. The lock is the rows of its prefixes (SELECT ... FOR UPDATE,
in prefix order, after creating missing ones), held in one transaction from reading the last
date to writing the new one; the last is the latest of those rows and of this node's
`state_dir/mint-last-date` (what it minted before it shared its state)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from . import StateError
from .file import FileState


@dataclass
class _Held:
    conn: Any
    prefixes: list[str]
    last: Decimal | None

    def keep(self, t: Decimal) -> None:
        self.conn.execute(
            "UPDATE mint_last SET last = %s WHERE prefix = ANY(%s)", (t, self.prefixes)
        )


class PostgresState:
    def __init__(self, database: str, prefixes: list[str], local: FileState) -> None:
        self.database = database
        self.prefixes = sorted(set(prefixes))
        self.local = local

    def last(self) -> Decimal | None:
        return self.local.last()

    @contextmanager
    def held(self) -> Iterator[_Held]:
        import psycopg

        from ...common import postgres

        try:
            with postgres.transaction(self.database) as conn:
                conn.execute(
                    "INSERT INTO mint_last (prefix) SELECT unnest(%s::text[]) ORDER BY 1 "
                    "ON CONFLICT DO NOTHING",
                    (self.prefixes,),
                )
                rows = conn.execute(
                    "SELECT last FROM mint_last WHERE prefix = ANY(%s) ORDER BY prefix FOR UPDATE",
                    (self.prefixes,),
                ).fetchall()
                known = [last for (last,) in rows if last is not None]
                local = self.local.last()
                if local is not None:
                    known.append(local)
                yield _Held(conn, self.prefixes, max(known, default=None))
        except (psycopg.Error, postgres.DatabaseError) as exc:
            where = postgres.redacted(self.database)
            raise StateError(f"cannot keep the minting state in database {where}: {exc}") from None
