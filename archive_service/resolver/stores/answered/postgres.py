"""The answered Archives in the resolver's PostgreSQL `database` (`resolver_answered`;
common/postgres.py SCHEMA["resolver"]), until `expires` (Unix time), an owner's OWNER_GRACE
longer (stores/answered/ `kept_until`)."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from ....common import postgres
from . import OWNER_GRACE, Entry, Sweeps, entry_of, holders_text, kept_until, sweep

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
                    (key, now - OWNER_GRACE),
                ).fetchone()
        except Exception as exc:  # the database down: resolve without it, asking all
            log.warning("answered Archives: cannot read %s: %s", self.where, exc)
            return None
        entry = entry_of(*row) if row else None
        return entry if entry and kept_until(key, entry) > now else None

    def remember(self, key: str, expires: float, keys: frozenset[str], owner: str | None) -> None:
        due = self._sweeps.due()
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
                if due:  # now and then, what is of no more use goes
                    sweep(conn.execute, "resolver_answered", self.clock(), "%s")
        except Exception as exc:
            log.warning("answered Archives: cannot write %s: %s", self.where, exc)
