"""The answered Archives in the resolver's PostgreSQL `database` (`resolver_answered`;
common/postgres.py SCHEMA["resolver"]), until `expires` (Unix time)."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from ....common import postgres
from . import Entry, Sweeps, entry_of, holders_text

# The name the log lines have always carried (this was resolver/answered.py's).
log = logging.getLogger("archive_service.resolver.answered")


class PostgresAnswered:
    def __init__(self, database: str, clock: Callable[[], float] = time.time):
        self.database = database
        self.clock = clock
        self.where = postgres.redacted(database)
        self._sweeps = Sweeps()

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
        return entry_of(*row) if row else None

    def remember(self, key: str, expires: float, keys: frozenset[str], owner: str | None) -> None:
        sweep = self._sweeps.due()
        try:
            with postgres.autocommit(self.database, timeout=1) as conn:
                if keys:
                    conn.execute(
                        "INSERT INTO resolver_answered (ibikey, holders, expires) "
                        "VALUES (%s, %s, %s) ON CONFLICT (ibikey) DO UPDATE SET "
                        "holders = excluded.holders, expires = excluded.expires",
                        (key, holders_text(keys, owner), expires),
                    )
                else:
                    conn.execute("DELETE FROM resolver_answered WHERE ibikey = %s", (key,))
                if sweep:  # now and then, what has expired goes
                    conn.execute(
                        "DELETE FROM resolver_answered WHERE expires < %s", (self.clock(),)
                    )
        except Exception as exc:
            log.warning("answered Archives: cannot write %s: %s", self.where, exc)
