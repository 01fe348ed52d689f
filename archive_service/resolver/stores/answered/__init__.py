"""The answered Archives kept beyond a worker's memory (resolver/answered.py keeps them per
worker in memory, bounded, and here): `recall(key, now)` gives an entry while it is of use
(`kept_until`: its holders until it expires, its owner OWNER_GRACE longer) or None,
`remember(key, expires, keys, owner)` keeps one (no keys: forgets it). Neither raises: a
store that fails is logged and the resolver asks every Archive. One module per backend:
`sqlite.SQLiteAnswered` (`state_dir/resolver-answered.sqlite3`, the default: what one
resolver learned survives a restart and the memory's bound, and its workers share it) and
`postgres.PostgresAnswered` (the resolver's `database`: shared by its instances too);
`open_shared` picks, as `open_registry` does for the registry. Both keep an entry's holders
as one text, the owner's key marked (`holders_text`, `entry_of`), and sweep alike now and
then: a row past its `kept_until`, then past MAX_ROWS those that expire soonest."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

Entry = tuple[float, frozenset[str], str | None]  # expiry, holders, owner

OWNER = "!"  # marks the owner's key among the holders kept (no IBI has it)

# How long an owner outlives its entry's expiry (answered_ttl): the only defence of an IBI no
# included Archive names (OAI imports, items minted elsewhere) against a hostile included
# Archive claiming every IBI, which won 2 of 5 first resolutions after the entry went (issue
# 30, ninth adversarial pass). A week: an owner that stops claiming gives way at once anyway
# (`settle_claims`), this bounds only how long an IBI nobody asks about stays taken.
OWNER_GRACE = 7 * 24 * 3600.0
# An IBI key longer than this gets no grace: a real one is 20-60 characters, but one may run
# to the request line's 4 KB, and a hostile Archive claiming such IBIs would keep 4 KB rows
# for a week (the idea of index/catalog.py KEPT_KEY).
KEPT_KEY = 128
# The rows a store keeps at most (the sweep's bound): a hostile Archive claiming random IBIs
# makes each resolution an owned row; past this the rows that expire soonest go, so a flood
# must last MAX_ROWS / rate to push out an owner remembered after it began. ~150 MB in SQLite.
MAX_ROWS = 1_000_000
# The rows that get no grace, as the sweep finds them (an index each backend makes on
# `expires` with this condition, so the sweep reads only them): `kept_until`'s rule in SQL.
UNGRACED = f"(length(ibikey) > {KEPT_KEY} OR holders NOT LIKE '%{OWNER}%')"


class SharedAnswered(Protocol):
    def recall(self, key: str, now: float) -> Entry | None: ...

    def remember(
        self, key: str, expires: float, keys: frozenset[str], owner: str | None
    ) -> None: ...


class Sweeps:
    """When a store's writer also sweeps (`sweep`): its first write, then every `every`-th
    (a table's size is then at most MAX_ROWS and a sweep interval's writes per writer)."""

    def __init__(self, every: int = 1000):
        self.every = every
        self._lock = threading.Lock()
        self._writes = 0

    def due(self) -> bool:
        with self._lock:
            self._writes += 1
            return self._writes % self.every == 1


def kept_until(key: str, entry: Entry) -> float:
    """Until when an entry is of use: its holders route until it expires; its owner, unless
    its key is longer than KEPT_KEY, stands OWNER_GRACE longer."""
    expires, _, owner = entry
    return expires + OWNER_GRACE if owner and len(key) <= KEPT_KEY else expires


def sweep(execute: Callable[[str, tuple], object], table: str, now: float, mark: str) -> None:
    """Delete from `table` the rows past their `kept_until`, then, past MAX_ROWS, those that
    expire soonest: `execute(sql, params)` a backend's, `mark` its placeholder."""
    ungraced = UNGRACED if mark == "?" else UNGRACED.replace("%", "%%")  # psycopg's escape
    execute(f"DELETE FROM {table} WHERE expires < {mark}", (now - OWNER_GRACE,))
    execute(f"DELETE FROM {table} WHERE {ungraced} AND expires < {mark}", (now,))
    execute(
        f"DELETE FROM {table} WHERE expires <= (SELECT expires FROM {table} "
        f"ORDER BY expires DESC LIMIT 1 OFFSET {mark})",
        (MAX_ROWS,),
    )


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
