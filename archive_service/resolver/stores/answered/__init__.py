"""The answered Archives kept beyond a worker's memory (resolver/answered.py keeps them per
worker in memory, bounded, and here): `recall(key, now)` gives an unexpired entry or None,
`remember(key, expires, keys, owner)` keeps one (no keys: forgets it). Neither raises: a
store that fails is logged and the resolver asks every Archive. One module per backend:
`sqlite.SQLiteAnswered` (`state_dir/resolver-answered.sqlite3`, the default: what one
resolver learned survives a restart and the memory's bound, and its workers share it) and
`postgres.PostgresAnswered` (the resolver's `database`: shared by its instances too);
`open_shared` picks, as `open_registry` does for the registry. Both keep an entry's holders
as one text, the owner's key marked (`holders_text`, `entry_of`)."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

Entry = tuple[float, frozenset[str], str | None]  # expiry, holders, owner

OWNER = "!"  # marks the owner's key among the holders kept (no IBI has it)


class SharedAnswered(Protocol):
    def recall(self, key: str, now: float) -> Entry | None: ...

    def remember(
        self, key: str, expires: float, keys: frozenset[str], owner: str | None
    ) -> None: ...


class Sweeps:
    """When a store's writer also deletes what has expired: its first write, then every
    `every`-th (a table's size is then bounded by the IBIs asked about within a TTL)."""

    def __init__(self, every: int = 1000):
        self.every = every
        self._lock = threading.Lock()
        self._writes = 0

    def due(self) -> bool:
        with self._lock:
            self._writes += 1
            return self._writes % self.every == 1


def holders_text(keys: frozenset[str], owner: str | None) -> str:
    """The holders as a store keeps them: their keys, the owner's marked `OWNER`."""
    return " ".join(OWNER * (k == owner) + k for k in sorted(keys))


def entry_of(expires: float, text: str) -> Entry:
    """An entry from its expiry and its `holders_text`."""
    words = text.split()
    owner = next((w[1:] for w in words if w.startswith(OWNER)), None)
    return expires, frozenset(w.removeprefix(OWNER) for w in words), owner


def open_shared(
    state_dir: str | os.PathLike | None,
    database: str = "",
    clock: Callable[[], float] = time.time,
) -> SharedAnswered | None:
    """In the resolver's `database` when it names one, else in `state_dir`; None without
    either (a worker's memory only)."""
    if database:
        from .postgres import PostgresAnswered

        return PostgresAnswered(database, clock)
    if state_dir is None:
        return None
    from ...config import ANSWERED_FILE
    from .sqlite import SQLiteAnswered

    return SQLiteAnswered(Path(state_dir) / ANSWERED_FILE, clock)
