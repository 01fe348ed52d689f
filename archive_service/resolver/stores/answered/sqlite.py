"""The answered Archives in SQLite (the default): `state_dir/resolver-answered.sqlite3`, one
row per IBI until `expires` (Unix time; an owner's OWNER_GRACE longer: `kept_until`), shared
by the resolver's workers and kept across its restarts. WAL: a reader never waits for the
writer; a writer waits at most BUSY_TIMEOUT for another's lock, then gives up (logged: the
resolution is not held up). synchronous=NORMAL (a commit costs no fsync, and it is made on
the request's path): a power loss may lose the last entries, a crash or a restart none."""

from __future__ import annotations

import logging
import sqlite3
import threading
import time
from collections.abc import Callable
from pathlib import Path

from ....common import db as dbmod
from ....common.processes import own_pid
from . import OWNER_GRACE, UNGRACED, Entry, Sweeps, entry_of, holders_text, kept_until, sweep

# The name the log lines have always carried (the store was resolver/answered.py's).
log = logging.getLogger("archive_service.resolver.answered")

BUSY_TIMEOUT = 1.0  # seconds; a write is a row, so only a stalled disk waits this long

_SCHEMA = f"""
CREATE TABLE IF NOT EXISTS answered (
    ibikey TEXT PRIMARY KEY,   -- the IBI's key (protocol/ibi.py key)
    holders TEXT NOT NULL,     -- service IBI keys, the owner's marked (holders_text)
    expires REAL NOT NULL      -- Unix time
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS answered_expires ON answered (expires);
-- the rows a sweep deletes at their expiry (`sweep`)
CREATE INDEX IF NOT EXISTS answered_ungraced ON answered (expires) WHERE {UNGRACED};
"""


class SQLiteAnswered:
    """A connection per thread (kept: a look-up is then one indexed SELECT), made again in a
    forked worker and after an error."""

    def __init__(self, path: Path, clock: Callable[[], float] = time.time):
        self.path = path
        self.where = str(path)
        self.clock = clock
        self._local = threading.local()
        self._sweeps = Sweeps()
        self._made = 0  # the pid that made the schema

    def _connection(self) -> sqlite3.Connection:
        local = self._local.__dict__
        if local.get("pid") != own_pid():  # none yet, or inherited through a fork
            self.path.parent.mkdir(parents=True, exist_ok=True)
            conn = dbmod.connect(self.path, timeout=BUSY_TIMEOUT)
            try:
                dbmod.use_wal(conn)
                if self._made != own_pid():
                    conn.executescript(_SCHEMA)
                    self._made = own_pid()
            except BaseException:
                conn.close()
                raise
            local.update(pid=own_pid(), conn=conn)
        return local["conn"]

    def _failed(self, doing: str, exc: Exception) -> None:
        log.warning("answered Archives: cannot %s %s: %s", doing, self.where, exc)
        self._made = 0  # the file may have been replaced: its schema made again
        conn = self._local.__dict__.pop("conn", None)
        self._local.__dict__.pop("pid", None)
        if conn is not None:
            conn.close()

    def recall(self, key: str, now: float) -> Entry | None:
        try:
            row = (
                self._connection()
                .execute(
                    "SELECT expires, holders FROM answered WHERE ibikey = ? AND expires > ?",
                    (key, now - OWNER_GRACE),
                )
                .fetchone()
            )
        except (sqlite3.Error, OSError) as exc:  # resolve without it, asking all
            self._failed("read", exc)
            return None
        entry = entry_of(*row) if row else None
        return entry if entry and kept_until(key, entry) > now else None

    def remember(self, key: str, expires: float, keys: frozenset[str], owner: str | None) -> None:
        due = self._sweeps.due()
        try:
            conn = self._connection()
            if keys:
                conn.execute(
                    "INSERT INTO answered (ibikey, holders, expires) VALUES (?, ?, ?) "
                    "ON CONFLICT (ibikey) DO UPDATE SET "
                    "holders = excluded.holders, expires = excluded.expires",
                    (key, holders_text(keys, owner), expires),
                )
            else:
                conn.execute("DELETE FROM answered WHERE ibikey = ?", (key,))
            if due:
                sweep(conn.execute, "answered", self.clock(), "?")
        except (sqlite3.Error, OSError) as exc:
            self._failed("write", exc)
