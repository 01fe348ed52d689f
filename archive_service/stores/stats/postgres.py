"""The statistics in the PostgreSQL database every node shares (the `database` setting):
the tables `stats_*` of common/postgres.py's SCHEMA."""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import date
from typing import Any

from ...protocol.urlkeys import CLOCK_SKEW, Verdict
from . import (
    BOUNDS,
    DONE,
    PURGE_EVERY,
    ROLLED,
    Acknowledgment,
    Statistics,
    StatsError,
    _day,
    _day_span,
    _days_from,
    counter,
)
from .report import build_report

ACK_WAIT = 5  # seconds an acknowledgment waits for a pooled PostgreSQL connection
MONTH_POSTGRES = counter.month_query("stats_uses", "user_hash", "floor(t / 3600)::bigint", "%s")
COUNT_POSTGRES = "SELECT count(*) FROM stats_uses WHERE t >= %s AND t < %s"
POSTGRES_DAYS = {
    "done": DONE.format(table="stats_uses_days", param="%s"),
    "rolled": ROLLED.format(table="stats_uses_days", param="%s"),
    "count": COUNT_POSTGRES,
    "month": MONTH_POSTGRES,
    "bounds": BOUNDS.format(table="stats_uses"),
}


# Data-modifying CTEs share one snapshot: `fresh` is what the INSERT did, read by the others.
COUNT_ONCE = """
WITH fresh AS (
    INSERT INTO stats_seen_keys (issued, nonce) VALUES (%s, %s)
    ON CONFLICT DO NOTHING RETURNING 1
), counted AS (
    INSERT INTO stats_counts SELECT %s, %s, %s, %s, 1 WHERE EXISTS (SELECT FROM fresh)
    ON CONFLICT (day, ibi, contenttype, state) DO UPDATE SET n = stats_counts.n + 1
), replayed AS (
    INSERT INTO stats_rejected SELECT %s, 'replay', 1 WHERE NOT EXISTS (SELECT FROM fresh)
    ON CONFLICT (day, reason) DO UPDATE SET n = stats_rejected.n + 1
)
SELECT EXISTS (SELECT FROM fresh)
"""


class PostgresStore(Statistics):
    """The statistics in the PostgreSQL database every node shares (the `database` setting):
    the same three tables (`stats_seen_keys`, `stats_counts`, `stats_rejected`, schema in
    common/postgres.py), one transaction per acknowledgment. The primary key of
    `stats_seen_keys` makes a head count once whichever node its acknowledgments reach: a
    second node inserting the same head waits for the first's commit, then inserts nothing.
    Each write is one statement in autocommit (COUNT_ONCE): one round trip an acknowledgment,
    twice the rate of BEGIN, statement, COMMIT."""

    def __init__(self, url: str, clock: Callable[[], float] = time.time, retention_days: int = 0):
        super().__init__(clock, retention_days)
        self.url = url
        from ...common import postgres

        self._postgres = postgres
        import psycopg

        self.storage_errors = (psycopg.Error, postgres.DatabaseError, OSError)

    def where(self) -> str:
        return f"database {self._postgres.redacted(self.url)}"

    def remedy(self) -> str:
        return "the database answers again (server up? connection limit?)"

    def _write(
        self, ack: Acknowledgment, reason: str, verdict: Verdict, now: float, lifetime: int
    ) -> str:
        purge = now - self._purged > PURGE_EVERY
        # A pool without a free connection for this long means the database is not keeping up:
        # the acknowledgment is answered anyway and counted as lost.
        with self._postgres.autocommit(self.url, timeout=ACK_WAIT) as conn:
            if purge:
                conn.execute(
                    "DELETE FROM stats_seen_keys WHERE issued < %s",
                    (int(now) - lifetime - CLOCK_SKEW,),
                )
            if reason == "valid":
                # One statement, one round trip: the head inserted unless seen, then a count
                # or a replay refusal, as the insert found.
                (fresh,) = conn.execute(
                    COUNT_ONCE,
                    (
                        verdict.issued,
                        verdict.nonce,
                        _day(now),
                        ack.ibi,
                        ack.contenttype,
                        ack.state,
                        _day(now),
                    ),
                ).fetchone()
                reason = "counted" if fresh else "replay"
            else:
                conn.execute(
                    "INSERT INTO stats_rejected VALUES (%s, %s, 1) ON CONFLICT (day, reason) "
                    "DO UPDATE SET n = stats_rejected.n + 1",
                    (_day(now), reason),
                )
        with self._lock:
            if purge:
                self._purged = now
            self._recovered()
        return reason

    def _day_salt(self, day: str, fresh: bytes) -> bytes:
        with self._postgres.transaction(self.url, timeout=ACK_WAIT) as conn:
            conn.execute("DELETE FROM stats_salts WHERE day < %s", (day,))
            conn.execute(
                "INSERT INTO stats_salts VALUES (%s, %s) ON CONFLICT (day) DO NOTHING",
                (day, fresh),
            )
            (salt,) = conn.execute("SELECT salt FROM stats_salts WHERE day = %s", (day,)).fetchone()
        return bytes(salt)

    def _insert_uses(self, rows: list[tuple[float, str, str, str, bool, str]]) -> None:
        with self._postgres.transaction(self.url, timeout=ACK_WAIT) as conn:
            with conn.cursor().copy(
                "COPY stats_uses (t, ibi, kind, user_hash, robot, access) FROM STDIN"
            ) as copy:
                for row in rows:
                    copy.write_row(row)
            conn.execute(  # as in Store._insert_uses
                "DELETE FROM stats_uses_days_done WHERE day = ANY(%s)",
                (sorted({_day(r[0]) for r in rows}),),
            )

    def _purge_uses(self, before: float) -> None:
        with self._postgres.autocommit(self.url, timeout=ACK_WAIT) as conn:
            conn.execute("DELETE FROM stats_uses WHERE t < %s", (before,))
            conn.execute("DELETE FROM stats_uses_days WHERE day <= %s", (_day(before),))
            conn.execute("DELETE FROM stats_uses_days_done WHERE day <= %s", (_day(before),))

    def uses(self, begin: float, end: float) -> list[counter.Use]:
        self.flush()
        try:
            with self._postgres.transaction(self.url) as conn:
                found = conn.execute(
                    "SELECT t, ibi, kind, user_hash, robot FROM stats_uses "
                    "WHERE t >= %s AND t < %s",
                    (begin, end),
                ).fetchall()
        except self.storage_errors as exc:
            raise StatsError(f"cannot read {self.where()}: {exc}") from None
        return [counter.Use(t, ibi, kind, user, robot) for t, ibi, kind, user, robot in found]

    def _read_days(
        self, days: list[str], summed: bool = True
    ) -> tuple[list[tuple], dict[str, tuple[list, int]]]:
        try:
            with self._postgres.transaction(self.url) as conn:
                conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
                rolled, live = _days_from(conn, days, POSTGRES_DAYS, True, summed)
        except self.storage_errors as exc:
            raise StatsError(f"cannot read {self.where()}: {exc}") from None
        return rolled, live

    def _roll_up(self, day: str, found: list[tuple], uses: int) -> None:
        start, stop = _day_span(day)
        with self._postgres.transaction(self.url, timeout=ACK_WAIT) as conn:
            # Against the flushes of every node: one that adds a use to this day deletes its
            # mark after its rows commit, so it waits for this lock or its rows are counted.
            conn.execute("LOCK TABLE stats_uses_days_done IN EXCLUSIVE MODE")
            if conn.execute(COUNT_POSTGRES, (start, stop)).fetchone()[0] != uses:
                return
            conn.execute("DELETE FROM stats_uses_days WHERE day = %s", (day,))
            with conn.cursor().copy("COPY stats_uses_days FROM STDIN") as copy:
                for row in found:
                    copy.write_row((day, *row))
            conn.execute(
                "INSERT INTO stats_uses_days_done VALUES (%s, %s) "
                "ON CONFLICT (day) DO UPDATE SET uses = excluded.uses",
                (day, uses),
            )

    def _first_use(self) -> float | None:
        with self._postgres.autocommit(self.url, timeout=ACK_WAIT) as conn:
            return conn.execute("SELECT min(t) FROM stats_uses").fetchone()[0]

    def report(self, since: date | None = None, top: int | None = None) -> dict[str, Any]:
        first = since.isoformat() if since else ""
        try:
            with self._postgres.transaction(self.url) as conn:
                counts = conn.execute(
                    "SELECT day, ibi, contenttype, state, n FROM stats_counts WHERE day >= %s",
                    (first,),
                ).fetchall()
                rejected = conn.execute(
                    "SELECT day, reason, n FROM stats_rejected WHERE day >= %s", (first,)
                ).fetchall()
        except self.storage_errors as exc:
            raise StatsError(f"cannot read {self.where()}: {exc}") from None
        return build_report(counts, rejected, since, top)
