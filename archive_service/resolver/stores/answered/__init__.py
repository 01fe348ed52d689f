"""The answered Archives shared by the resolver's instances (resolver/answered.py keeps them
per worker in memory, and here when the resolver's `database` names one): `recall(key, now)`
gives an unexpired entry or None, `remember(key, expires, keys, owner)` keeps one (no keys:
forgets it). Neither raises: a store that fails is logged and the resolver asks every
Archive. One module per backend: `postgres.PostgresAnswered`; without `database` there is
no shared store (SQLite would be one resolver's memory again), `open_shared` gives None."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Protocol

Entry = tuple[float, frozenset[str], str | None]  # expiry, holders, owner


class SharedAnswered(Protocol):
    def recall(self, key: str, now: float) -> Entry | None: ...

    def remember(
        self, key: str, expires: float, keys: frozenset[str], owner: str | None
    ) -> None: ...


def open_shared(database: str, clock: Callable[[], float] = time.time) -> SharedAnswered | None:
    if not database:
        return None
    from .postgres import PostgresAnswered

    return PostgresAnswered(database, clock)
