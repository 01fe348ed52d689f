"""The statistics in SQLite (the default): `<state_dir>/stats.sqlite3`, WAL, one short
IMMEDIATE transaction per acknowledgment, so any number of workers (and `archive-service
stats` reading) share it. Tables: `seen_keys` (the heads counted: two integers, about 18
bytes a key; rows older than the key lifetime, an hour, are purged every 10 minutes per
process, since such keys are refused as expired before `seen_keys` is consulted, and a new
database gives the freed pages back to the file system: at most an hour of answers is
remembered), `counts` (per UTC day, item, contenttype and state: bounded by the items held),
`rejected` (per UTC day and reason), and the COUNTER `uses`, `salts`, `uses_days`."""

from __future__ import annotations

import os
import random
import sqlite3
import time
from collections.abc import Callable
from datetime import date
from pathlib import Path
from typing import Any

from ...common import db
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

DB_FILE = "stats.sqlite3"
BUSY_RETRIES = 8  # tries again when SQLite says "locked" without using its busy timeout
SEEN_TABLE = "seen_keys"

# `seen` held whole keys (any length) before keys were counted by their head; those keys are
# refused now, so its rows mean nothing (VACUUM gives its pages back to the file system).
SCHEMA = f"""
CREATE TABLE IF NOT EXISTS {SEEN_TABLE} (
    issued INTEGER NOT NULL, nonce INTEGER NOT NULL, PRIMARY KEY (issued, nonce)) WITHOUT ROWID;
DROP TABLE IF EXISTS seen;
CREATE TABLE IF NOT EXISTS counts (
    day TEXT NOT NULL, ibi TEXT NOT NULL, contenttype TEXT NOT NULL, state TEXT NOT NULL,
    n INTEGER NOT NULL, PRIMARY KEY (day, ibi, contenttype, state)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS rejected (
    day TEXT NOT NULL, reason TEXT NOT NULL, n INTEGER NOT NULL,
    PRIMARY KEY (day, reason)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS uses (
    t REAL NOT NULL, ibi TEXT NOT NULL, kind TEXT NOT NULL, user TEXT NOT NULL,
    robot INTEGER NOT NULL, access TEXT NOT NULL DEFAULT 'Open');
CREATE INDEX IF NOT EXISTS uses_t ON uses (t);
CREATE TABLE IF NOT EXISTS salts (day TEXT PRIMARY KEY, salt BLOB NOT NULL) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS uses_days (
    day TEXT NOT NULL, ibi TEXT NOT NULL, access TEXT NOT NULL, investigations INTEGER NOT NULL,
    unique_investigations INTEGER NOT NULL, requests INTEGER NOT NULL,
    unique_requests INTEGER NOT NULL, PRIMARY KEY (day, ibi, access)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS uses_days_done (
    day TEXT PRIMARY KEY, uses INTEGER NOT NULL) WITHOUT ROWID;
"""

# t is seconds since the epoch, positive: truncation is the hour's floor in SQLite.
MONTH_SQLITE = counter.month_query("uses", "user", "CAST(t / 3600 AS INTEGER)", "?")
COUNT_SQLITE = "SELECT count(*) FROM uses WHERE t >= ? AND t < ?"
SQLITE_DAYS = {
    "done": DONE.format(table="uses_days", param="?"),
    "rolled": ROLLED.format(table="uses_days", param="?"),
    "count": COUNT_SQLITE,
    "month": MONTH_SQLITE,
    "bounds": BOUNDS.format(table="uses"),
}


class Store(Statistics):
    """The statistics in SQLite in the state directory (the default); connects lazily, once
    per process (safe across fork)."""

    storage_errors = (sqlite3.Error, OSError)

    def __init__(
        self,
        state_dir: str | os.PathLike,
        clock: Callable[[], float] = time.time,
        retention_days: int = 0,
    ):
        super().__init__(clock, retention_days)
        self.path = Path(state_dir) / DB_FILE
        self._conn: sqlite3.Connection | None = None
        self._pid = 0

    def where(self) -> str:
        return str(self.path)

    def remedy(self) -> str:
        parent = self.path.parent
        return f"the state directory {parent} can be written again (free space? permissions?)"

    # -- writing (the service) ------------------------------------------------------------

    def _connection(self) -> sqlite3.Connection:
        if self._conn is None or self._pid != os.getpid():
            # A connection inherited through fork is never used: SQLite forbids it.
            self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            conn = db.connect(self.path, timeout=10, check_same_thread=False)
            try:
                # Only takes on a new database (before WAL and tables): it gives purged pages
                # back to the file system.
                conn.execute("PRAGMA auto_vacuum=INCREMENTAL")
                db.use_wal(conn)
                conn.executescript(SCHEMA)
                columns = {row[1] for row in conn.execute("PRAGMA table_info(uses)")}
                if "access" not in columns:  # a store from before Access_Type was recorded
                    conn.execute("ALTER TABLE uses ADD COLUMN access TEXT NOT NULL DEFAULT 'Open'")
            except BaseException:
                conn.close()
                raise
            self._conn, self._pid = conn, os.getpid()
        return self._conn

    def _write(
        self, ack: Acknowledgment, reason: str, verdict: Verdict, now: float, lifetime: int
    ) -> str:
        for attempt in range(BUSY_RETRIES + 1):
            try:
                with self._lock:
                    outcome = self._record(ack, reason, verdict, now, lifetime)
                    self._recovered()
                return outcome
            except sqlite3.OperationalError as exc:
                # SQLite answers "locked" without waiting in a few cases (a new database
                # turning to WAL, WAL recovery): those are worth another try.
                if "locked" in str(exc) and attempt < BUSY_RETRIES:
                    time.sleep(0.01 * (attempt + 1) + random.random() * 0.01)
                    continue
                raise
        raise AssertionError("unreachable")

    def _record(
        self, ack: Acknowledgment, reason: str, verdict: Verdict, now: float, lifetime: int
    ) -> str:
        conn = self._connection()
        day = _day(now)
        purge = now - self._purged > PURGE_EVERY
        conn.execute("BEGIN IMMEDIATE")
        try:
            if purge:
                conn.execute(
                    f"DELETE FROM {SEEN_TABLE} WHERE issued < ?",
                    (int(now) - lifetime - CLOCK_SKEW,),
                )
            if reason == "valid":
                fresh = conn.execute(
                    f"INSERT INTO {SEEN_TABLE} (issued, nonce) VALUES (?, ?) "
                    "ON CONFLICT DO NOTHING",
                    (verdict.issued, verdict.nonce),
                ).rowcount
                reason = "counted" if fresh else "replay"
            if reason == "counted":
                conn.execute(
                    "INSERT INTO counts VALUES (?, ?, ?, ?, 1) ON CONFLICT DO UPDATE SET n = n + 1",
                    (day, ack.ibi, ack.contenttype, ack.state),
                )
            else:
                conn.execute(
                    "INSERT INTO rejected VALUES (?, ?, 1) ON CONFLICT DO UPDATE SET n = n + 1",
                    (day, reason),
                )
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
        if purge:
            self._purged = now
            try:
                # executescript steps the pragma to its end: execute() frees one page only.
                conn.executescript("PRAGMA incremental_vacuum;")
            except sqlite3.Error:
                pass  # the acknowledgment is recorded; the free pages wait for the next purge
        return reason

    def _day_salt(self, day: str, fresh: bytes) -> bytes:
        with self._lock:
            conn = self._connection()
            # A deleted row stays in its page's free space and in the WAL frame that inserted
            # it: with the salt on disk an address is found again by trying them all. Zeroed
            # on delete, and the WAL emptied once an earlier day's salt is gone.
            # (For this transaction alone: the retention sweep's deletes need no zeroing.)
            conn.execute("PRAGMA secure_delete=ON")
            try:
                with conn:  # every worker ends up with the first salt written (ON CONFLICT)
                    gone = conn.execute("DELETE FROM salts WHERE day < ?", (day,)).rowcount
                    conn.execute(
                        "INSERT INTO salts VALUES (?, ?) ON CONFLICT DO NOTHING", (day, fresh)
                    )
                    (salt,) = conn.execute(
                        "SELECT salt FROM salts WHERE day = ?", (day,)
                    ).fetchone()
            finally:
                conn.execute("PRAGMA secure_delete=OFF")
        if gone:
            # Its own connection, a second's wait, outside the lock: acknowledgments do not
            # wait for readers. One holding a snapshot keeps the frames until the next day's.
            try:
                spare = db.connect(self.path, timeout=1)
                try:
                    spare.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
                finally:
                    spare.close()
            except sqlite3.Error:
                pass
        return bytes(salt)

    def _insert_uses(self, rows: list[tuple[float, str, str, str, bool, str]]) -> None:
        for attempt in range(BUSY_RETRIES + 1):
            try:
                with self._lock:
                    conn = self._connection()
                    conn.execute("BEGIN IMMEDIATE")
                    try:
                        conn.executemany(
                            "INSERT INTO uses (t, ibi, kind, user, robot, access) "
                            "VALUES (?, ?, ?, ?, ?, ?)",
                            rows,
                        )
                        # A day rolled up is one no use comes to any more; one that does
                        # (a batch across midnight, one kept while the store was down) is
                        # computed again.
                        conn.executemany(
                            "DELETE FROM uses_days_done WHERE day = ?",
                            [(d,) for d in {_day(r[0]) for r in rows}],
                        )
                        conn.execute("COMMIT")
                    except BaseException:
                        if conn.in_transaction:
                            conn.execute("ROLLBACK")
                        raise
                return
            except sqlite3.OperationalError as exc:
                if "locked" in str(exc) and attempt < BUSY_RETRIES:  # as in _write
                    time.sleep(0.01 * (attempt + 1) + random.random() * 0.01)
                    continue
                raise

    def _purge_uses(self, before: float) -> None:
        with self._lock:
            conn = self._connection()
            conn.execute("DELETE FROM uses WHERE t < ?", (before,))
            conn.execute("DELETE FROM uses_days WHERE day <= ?", (_day(before),))
            conn.execute("DELETE FROM uses_days_done WHERE day <= ?", (_day(before),))
            try:
                conn.executescript("PRAGMA incremental_vacuum;")  # the pages back, as above
            except sqlite3.Error:
                pass

    def uses(self, begin: float, end: float) -> list[counter.Use]:
        self.flush()
        try:
            if not self.path.exists():
                return []
            conn = db.connect_readonly(self.path, timeout=10)
            try:
                found = conn.execute(
                    "SELECT t, ibi, kind, user, robot FROM uses WHERE t >= ? AND t < ?",
                    (begin, end),
                ).fetchall()
            finally:
                conn.close()
        except (sqlite3.Error, OSError) as exc:
            raise StatsError(f"cannot read {self.path}: {exc}") from None
        return [counter.Use(t, ibi, kind, user, bool(robot)) for t, ibi, kind, user, robot in found]

    def _read_days(
        self, days: list[str], summed: bool = True
    ) -> tuple[list[tuple], dict[str, tuple[list, int]]]:
        try:
            if not self.path.exists():
                return [], {}
            conn = db.connect_readonly(self.path, timeout=10)
            try:
                conn.execute("BEGIN")  # one snapshot: a writer goes on meanwhile (WAL)
                # A store no process of this version wrote yet has no days kept.
                kept = conn.execute(
                    "SELECT 1 FROM sqlite_master WHERE name = 'uses_days_done'"
                ).fetchone()
                rolled, live = _days_from(conn, days, SQLITE_DAYS, bool(kept), summed)
                conn.execute("COMMIT")
            finally:
                conn.close()
        except (sqlite3.Error, OSError) as exc:
            raise StatsError(f"cannot read {self.path}: {exc}") from None
        return rolled, live

    def _roll_up(self, day: str, found: list[tuple], uses: int) -> None:
        start, stop = _day_span(day)
        with self._lock:
            conn = self._connection()
            conn.execute("BEGIN IMMEDIATE")
            try:
                if conn.execute(COUNT_SQLITE, (start, stop)).fetchone()[0] == uses:
                    conn.execute("DELETE FROM uses_days WHERE day = ?", (day,))
                    conn.executemany(
                        "INSERT INTO uses_days VALUES (?, ?, ?, ?, ?, ?, ?)",
                        [(day, *row) for row in found],
                    )
                    conn.execute("INSERT OR REPLACE INTO uses_days_done VALUES (?, ?)", (day, uses))
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise

    def _first_use(self) -> float | None:
        with self._lock:
            return self._connection().execute("SELECT min(t) FROM uses").fetchone()[0]

    def close(self) -> None:
        self.flush()
        if self._conn is not None and self._pid == os.getpid():
            self._conn.close()
        self._conn = None

    def report(self, since: date | None = None, top: int | None = None) -> dict[str, Any]:
        """Counts from `since` (a UTC day, inclusive) on; `top` limits the item list."""
        empty = {
            "since": since.isoformat() if since else None,
            "total": 0,
            "rejected": 0,
            "rejected_by_reason": {},
            "by_contenttype": {},
            "by_state": {},
            "days": [],
            "items": [],
        }
        try:
            if not self.path.exists():
                return empty
        except OSError as exc:  # a directory on the way this user may not enter
            raise StatsError(f"cannot read {self.path}: {exc.strerror or exc}") from None
        first = since.isoformat() if since else ""
        try:
            conn = db.connect_readonly(self.path, timeout=10)
            try:
                counts = conn.execute(
                    "SELECT day, ibi, contenttype, state, n FROM counts WHERE day >= ?", (first,)
                ).fetchall()
                rejected = conn.execute(
                    "SELECT day, reason, n FROM rejected WHERE day >= ?", (first,)
                ).fetchall()
            finally:
                conn.close()
        except sqlite3.Error as exc:
            raise StatsError(f"cannot read {self.path}: {exc}") from None
        return build_report(counts, rejected, since, top)
