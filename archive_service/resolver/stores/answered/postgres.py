"""The answered Archives in the resolver's PostgreSQL `database` (`resolver_answered`;
common/postgres.py SCHEMA["resolver"]), until `expires` (Unix time)."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from ....common import postgres
from . import Entry

# The name the log lines have always carried (this was resolver/answered.py's).
log = logging.getLogger("archive_service.resolver.answered")

OWNER = "!"  # marks the owner's key among the holders kept in PostgreSQL (no IBI has it)


class PostgresAnswered:
    def __init__(self, database: str, clock: Callable[[], float] = time.time):
        self.database = database
        self.clock = clock
        self.where = postgres.redacted(database)
        self._lock = threading.Lock()
        self._writes = 0

    def recall(self, key: str, now: float) -> Entry | None:
        try:
            with postgres.transaction(self.database, timeout=1) as conn:
                row = conn.execute(
                    "SELECT expires, holders FROM resolver_answered WHERE ibikey = %s "
                    "AND expires > %s",
                    (key, now),
                ).fetchone()
        except Exception as exc:  # the database down: resolve without it, asking all
            log.warning("answered Archives: cannot read %s: %s", self.where, exc)
            return None
        if not row:
            return None
        words = row[1].split()
        owner = next((w[1:] for w in words if w.startswith(OWNER)), None)
        return row[0], frozenset(w.removeprefix(OWNER) for w in words), owner

    def remember(self, key: str, expires: float, keys: frozenset[str], owner: str | None) -> None:
        with self._lock:
            self._writes += 1
            sweep = self._writes % 1000 == 1
        try:
            with postgres.autocommit(self.database, timeout=1) as conn:
                if keys:
                    conn.execute(
                        "INSERT INTO resolver_answered (ibikey, holders, expires) "
                        "VALUES (%s, %s, %s) ON CONFLICT (ibikey) DO UPDATE SET "
                        "holders = excluded.holders, expires = excluded.expires",
                        (key, " ".join(OWNER * (k == owner) + k for k in sorted(keys)), expires),
                    )
                else:
                    conn.execute("DELETE FROM resolver_answered WHERE ibikey = %s", (key,))
                if sweep:  # now and then, what has expired goes
                    conn.execute(
                        "DELETE FROM resolver_answered WHERE expires < %s", (self.clock(),)
                    )
        except Exception as exc:
            log.warning("answered Archives: cannot write %s: %s", self.where, exc)
