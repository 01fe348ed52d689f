"""Access statistics: acknowledgments (§6, Table 6.11) this Archive can vouch for, counted once.

An acknowledgment counts when its `urlkey` is a key this Archive issued for its `url`
(protocol/urlkeys.py), its URL names an item held here, and no acknowledgment of the same key was
counted before. "The same key" is the key's identity, its head (the issue time and nonce of
the answer it came with), not its spelling: one answer counts at most once, whatever is
appended to its key or whichever of its URLs is acknowledged. The item, content type and state
counted are what the Archive's index says of the URL (answers.Archive.item_of_url), never what
the acknowledgment claims, and only when the resolver sent it (web/acknowledgers.py). Anything
else is refused and counted apart by reason (`not-resolver`: another sender, `malformed`,
`future`, `expired`, `forged`, `unknown`: no item held here, `replay`); refusals are logged at
INFO summed up (the first at once, then at most one line a minute per process), never the key.
The answer to the resolver is `notice {acknowledgment received}` either way: the protocol fixes
it, and a failing store must not turn it into an error. A store that cannot write is logged at
ERROR at once (then at most once a minute while it lasts, and once when it recovers) and
`Store.problem` says so in one line until a write succeeds again, for a health check to read.

Storage: SQLite in `<state_dir>/stats.sqlite3`, WAL, one short IMMEDIATE transaction per
acknowledgment, so any number of workers (and `archive-service stats` reading) share it.
Tables: `seen_keys` (the heads counted: two integers, about 18 bytes a key; rows older than
the key lifetime, an hour, are purged every 10 minutes per process, since such keys are
refused as expired before `seen_keys` is consulted, and a new database gives the freed pages
back to the file system: at most an hour of answers is remembered), `counts` (per UTC day,
item, contenttype and state: bounded by the items held) and `rejected` (per UTC day and
reason: a handful of rows however many are refused). No Flask here.

With the `database` setting the same tables live in PostgreSQL (`PostgresStore`, prefixed
`stats_`), shared by every node: the primary key of the seen heads is what makes "counted
once" hold across nodes, and `report` reads the same rows on any node. `open_store` picks the
store; both stand behind `Statistics`, which holds what a refusal is and how failures are
logged.

For COUNTER (web/counter.py, docs/counter.md) the same stores keep `uses`: one row per use
(`record_use`: a /col/ file, file list or metadata page served, or an acknowledgment counted)
with its time, item, kind, robot flag and a user that is a hash of client address and
User-Agent under a salt of the UTC day (`salts`, one row, the earlier days' deleted with it):
never the address. Rows older than `stats_retention_days` are deleted. Uses are buffered per
process and written in batches by a thread of the process (`flush`): a download pays an
append, not a transaction; acknowledgments stay one transaction each (a replay is refused
only because the first is written).
"""

from __future__ import annotations

import atexit
import functools
import hashlib
import logging
import os
import random
import re
import sqlite3
import threading
import time
import weakref
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

from ..common import db
from ..protocol.urlkeys import CLOCK_SKEW, UrlKeys, Verdict
from . import counter, metrics

log = logging.getLogger(__name__)

DB_FILE = "stats.sqlite3"
PURGE_EVERY = 600  # seconds between purges of expired `seen_keys` rows, per process
BUSY_RETRIES = 8  # tries again when SQLite says "locked" without using its busy timeout
ERROR_LOG_EVERY = 60  # seconds between two logs of a failing store, per process
REFUSAL_LOG_EVERY = 60  # seconds between two summaries of refused acknowledgments, per process
ACK_WAIT = 5  # seconds an acknowledgment waits for a pooled PostgreSQL connection
REASONS = ("not-resolver", "malformed", "future", "expired", "forged", "unknown", "replay")
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


def _robots() -> re.Pattern:
    # counter_robots.is_robot_or_machine reads its lists in the locale's encoding: under LANG=C
    # (mod_wsgi) their non-ASCII lines raise UnicodeDecodeError. Its files, read as UTF-8.
    from importlib.resources import files

    data = files("counter_robots") / "data"
    lines = [
        line
        for name in ("robot.txt", "machine.txt")  # what is_robot_or_machine matches
        for line in (data / name).read_text(encoding="utf-8").splitlines()
    ]
    # The list's README asks for case-insensitive matching: "GOOGLEBOT", "Wget/1.21" and
    # "CURL/8.5" are on it as much as "Googlebot", "wget" and "curl/".
    return re.compile("|".join(lines), re.IGNORECASE)


ROBOTS = _robots()  # the COUNTER robots list: a User-Agent it matches is a robot's


@functools.lru_cache(maxsize=4096)
def is_robot(agent: str) -> bool:
    """The COUNTER robots list matches `agent` (a few User-Agents make most of the uses)."""
    return ROBOTS.search(agent) is not None


# Uses are buffered per process and written in batches by one thread per process, started by
# the process's first use: after gunicorn forks its workers, never in the master before.
FLUSH_EVERY = 1.0  # seconds between two batches at most
FLUSH_ROWS = 500  # a buffer this long is written at once
BUFFER_MAX = 100_000  # uses a process keeps unwritten at most (about 30 MB); more are dropped
# A finished UTC day's figures are computed once (`uses_days`) and the reports add them up:
# sessions and double-clicks never cross midnight (the user is a hash under the day's salt).
ROLLUP_AFTER = 300  # seconds after a day ends before it is rolled up (late batches still come)
ROLLUP_DAYS = 7  # days a process rolls up at most per PURGE_EVERY (a first backfill spreads)
_buffers_lock = threading.Lock()
_buffered: weakref.WeakSet[Statistics] = weakref.WeakSet()  # stores with uses in this process
_wake = threading.Event()
_flusher_pid = 0


def _start_flusher() -> None:
    # Called with _buffers_lock held.
    global _flusher_pid
    if _flusher_pid == os.getpid():
        return
    _flusher_pid = os.getpid()
    threading.Thread(target=_flush_forever, name="counter-uses", daemon=True).start()


def _flush_forever() -> None:
    while True:
        _wake.wait(FLUSH_EVERY)
        _wake.clear()
        flush_all()


def flush_all() -> None:
    """Write every store's buffered uses of this process (the flusher; at exit)."""
    with _buffers_lock:
        stores = list(_buffered)
    for store in stores:
        try:
            store.flush()
        except Exception:  # a bug in one store must not stop the thread or the exit
            log.exception("cannot write the COUNTER uses of %s", store.where())


def _after_fork_in_child() -> None:
    # A fork copies the parent's buffers and maybe a held lock, never its flusher thread: the
    # parent writes its uses, the child starts afresh with its own first use.
    global _buffers_lock, _flusher_pid
    _buffers_lock = threading.Lock()
    _flusher_pid = 0
    _wake.clear()
    for store in list(_buffered):
        store._buffer, store._buffer_pid = [], 0
        store._flushing = threading.Lock()
    _buffered.clear()


os.register_at_fork(after_in_child=_after_fork_in_child)
atexit.register(flush_all)  # a graceful stop writes what is buffered (gunicorn: worker_exit too)

# t is seconds since the epoch, positive: truncation is the hour's floor in SQLite.
MONTH_SQLITE = counter.month_query("uses", "user", "CAST(t / 3600 AS INTEGER)", "?")
MONTH_POSTGRES = counter.month_query("stats_uses", "user_hash", "floor(t / 3600)::bigint", "%s")
COUNT_SQLITE = "SELECT count(*) FROM uses WHERE t >= ? AND t < ?"
COUNT_POSTGRES = "SELECT count(*) FROM stats_uses WHERE t >= %s AND t < %s"
# Two subqueries, not min(t), max(t): each then reads one end of the index on t.
BOUNDS = "SELECT (SELECT min(t) FROM {table}), (SELECT max(t) FROM {table})"
# ROLLED: the kept figures of the days still marked done only. A late batch (another node's,
# another worker's) deletes a day's mark but not its figures, and the day is then computed
# from its uses: adding the figures too counted it twice until it was rolled up again.
ROLLED = """
SELECT substr(day, 1, 7), ibi, access, sum(investigations), sum(unique_investigations),
    sum(requests), sum(unique_requests)
FROM {table} WHERE day >= {param} AND day <= {param}
    AND day IN (SELECT day FROM {table}_done)
GROUP BY substr(day, 1, 7), ibi, access
"""
DONE = "SELECT day FROM {table}_done WHERE day >= {param} AND day <= {param}"
SQLITE_DAYS = {
    "done": DONE.format(table="uses_days", param="?"),
    "rolled": ROLLED.format(table="uses_days", param="?"),
    "count": COUNT_SQLITE,
    "month": MONTH_SQLITE,
    "bounds": BOUNDS.format(table="uses"),
}
POSTGRES_DAYS = {
    "done": DONE.format(table="stats_uses_days", param="%s"),
    "rolled": ROLLED.format(table="stats_uses_days", param="%s"),
    "count": COUNT_POSTGRES,
    "month": MONTH_POSTGRES,
    "bounds": BOUNDS.format(table="stats_uses"),
}


def _days_from(conn, days: list[str], sql: dict[str, str], kept: bool, summed: bool):
    """`Statistics._read_days` from `conn`'s snapshot, in a store's dialect (`sql`);
    `kept` False: the store has no table of kept days yet."""
    first_last = (days[0], days[-1])
    done = {d for (d,) in conn.execute(sql["done"], first_last)} if kept else set()
    rolled = conn.execute(sql["rolled"], first_last).fetchall() if kept and summed else []
    # No use outside the days of the first and last one kept: those days are not asked one
    # by one (an Item Report from 1970-01 was 20,000 queries, 1.5 s of PostgreSQL, a GET).
    first, last = conn.execute(sql["bounds"]).fetchone()
    used = (_day(first), _day(last)) if first is not None else ("~", "")
    live = {}
    for day in days:
        if day in done:
            continue
        if not used[0] <= day <= used[1]:
            live[day] = ([], 0)
            continue
        span = _day_span(day)
        (uses,) = conn.execute(sql["count"], span).fetchone()
        live[day] = (conn.execute(sql["month"], span).fetchall() if uses else [], uses)
    return rolled, live


@dataclass(frozen=True)
class Acknowledgment:
    """One well-formed acknowledgment's `urlkey` and `url`, and what the Archive's index says
    that URL names: the item's `ibi`, the `contenttype` and `state` it is counted with (None:
    no item held here). Never what the acknowledgment claims."""

    urlkey: str
    url: str
    contenttype: str
    state: str
    ibi: str | None
    client: str = ""  # the user's address as the resolver gave it (never stored)
    # The URL is one this Archive serves (/col/, its pages): the use is seen when it is
    # served, with its User-Agent; counting the acknowledgment too would count it twice.
    served_here: bool = False
    access: str = counter.OPEN  # the item's Access_Type (counter.access_type)
    # Sent from resolver_networks (web/acknowledgers.py); any other sender counts nothing.
    from_resolver: bool = True


@dataclass(frozen=True)
class Seen:
    """One use the Archive served itself (/col/ file, file list, metadata page) or an
    acknowledgment counted: what COUNTER needs. `client` and `agent` are hashed into a
    day's user before anything is stored; `agent` None: not seen (an acknowledgment)."""

    ibi: str
    kind: str  # counter.REQUEST or counter.INVESTIGATION
    client: str
    agent: str | None
    access: str = counter.OPEN  # the item's Access_Type then (counter.access_type)


class StatsError(RuntimeError):
    """The statistics cannot be read (for `archive-service stats`)."""


def _day(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, tz=UTC).date().isoformat()


def _day_span(day: str) -> tuple[float, float]:
    """The UTC day `day` (YYYY-MM-DD) from its first second to before the next day's."""
    start = datetime.fromisoformat(day).replace(tzinfo=UTC).timestamp()
    return start, start + 86400


class Statistics:
    """The one store interface of the statistics: `acknowledge` (the service), `report` (the
    page and `archive-service stats`), `problem` (the health check), `close`. Two stores stand
    behind it: `Store` (SQLite in the state directory, the default) and `PostgresStore` (the
    `database` setting, shared by every node); `open_store` picks one. What a refusal is and
    how failures are logged lives here, once; a store only records and reads."""

    def __init__(self, clock: Callable[[], float] = time.time, retention_days: int = 0):
        self._clock = clock
        self.retention_days = retention_days  # 0: uses are kept for ever
        self._salts: dict[str, bytes] = {}  # the UTC days' salts (the flusher's)
        self._uses_purged = 0.0
        self._buffer: list[tuple[float, Seen]] = []  # uses not written yet, this process's
        self._buffer_pid = 0
        self._flushing = threading.Lock()  # one batch written at a time
        self.uses_dropped = 0  # uses lost: the buffer full (the store down or too slow)
        self._uses_error_logged = 0.0
        self._lock = threading.Lock()
        self._purged = 0.0
        self._error_logged = 0.0
        self._problem: str | None = None
        self._unrecorded = 0  # acknowledgments lost while the store fails
        self._refused: Counter = Counter()  # refusals since the last summary
        self._refusals_logged = 0.0
        self._last_refused = ""

    # What a store that cannot write raises (anything else is a bug, not an outage).
    storage_errors: tuple[type[BaseException], ...] = (OSError,)

    @property
    def problem(self) -> str | None:
        """None, or one line saying why acknowledgments are not being counted (the last
        write of this process failed): for a health check."""
        return self._problem

    def where(self) -> str:
        """Where the statistics are kept, for messages."""
        raise NotImplementedError

    def remedy(self) -> str:
        """What must change for a failing store to record again, for the error log."""
        raise NotImplementedError

    def _write(
        self, ack: Acknowledgment, reason: str, verdict: Verdict, now: float, lifetime: int
    ) -> str:
        """Record one acknowledgment (`reason`: 'valid' or a refusal's) and call
        `_recovered`; returns 'counted' or the refusal recorded."""
        raise NotImplementedError

    def report(self, since: date | None = None, top: int | None = None) -> dict[str, Any]:
        """Counts from `since` (a UTC day, inclusive) on; `top` limits the item list."""
        raise NotImplementedError

    def close(self) -> None:
        self.flush()

    def _day_salt(self, day: str, fresh: bytes) -> bytes:
        """The salt of UTC `day` (`fresh` if it has none yet); forgets earlier days' salts."""
        raise NotImplementedError

    def _insert_uses(self, rows: list[tuple[float, str, str, str, bool, str]]) -> None:
        """Write rows (t, ibi, kind, user, robot, access) in one transaction."""
        raise NotImplementedError

    def _purge_uses(self, before: float) -> None:
        raise NotImplementedError

    def uses(self, begin: float, end: float) -> list[counter.Use]:
        """The uses recorded from `begin` to before `end` (seconds since the epoch)."""
        raise NotImplementedError

    def _read_days(
        self, days: list[str], summed: bool = True
    ) -> tuple[list[tuple], dict[str, tuple[list, int]]]:
        """From one snapshot: the rolled-up figures of `days` (UTC days, in order) summed per
        month, item and Access_Type, (YYYY-MM, ibi, access, four counts); and for each day
        not rolled up, its `counter.month_query` rows and how many uses it holds (robots
        included). `summed` False: the days not kept only (what `roll_up` needs)."""
        raise NotImplementedError

    def _roll_up(self, day: str, found: list[tuple], uses: int) -> None:
        """Keep `found`, the figures of the finished `day`, unless its uses are no longer the
        `uses` they were computed from (a late batch, a purge): one transaction."""
        raise NotImplementedError

    def _first_use(self) -> float | None:
        raise NotImplementedError

    def _day_figures(self, days: list[str]) -> dict[str, dict[tuple[str, str], list[int]]]:
        """{YYYY-MM: {(ibi, Access_Type): the four counts}} of `days`: the rolled-up ones as
        kept, the others computed, and kept when finished (if this process can write)."""
        rolled, live = self._read_days(days)
        months: dict[str, dict[tuple[str, str], list[int]]] = defaultdict(dict)
        for month, ibi, access, *counts in rolled:
            months[month][ibi, access] = [int(n) for n in counts]
        finished = _day(self._clock() - 86400 - ROLLUP_AFTER)
        for day, (found, uses) in live.items():
            month = months[day[:7]]
            for ibi, access, *counts in found:
                old = month.setdefault((ibi, access), [0, 0, 0, 0])
                for k, n in enumerate(counts):
                    old[k] += int(n)
            if uses and day <= finished:
                try:
                    self._roll_up(day, found, uses)
                except (*self.storage_errors, StatsError):
                    pass  # a reader that cannot write (another user): the next one will
        return months

    def roll_up(self) -> None:
        """Keep the figures of finished days not kept yet (ROLLUP_DAYS at most, the oldest
        first): what makes a month's report a sum of days. The flusher calls it."""
        first = self._first_use()
        if first is None:
            return
        last = datetime.fromisoformat(_day(self._clock() - 86400 - ROLLUP_AFTER)).date()
        day = datetime.fromtimestamp(first, tz=UTC).date()
        days = []
        while day <= last:
            days.append(day.isoformat())
            day = date.fromordinal(day.toordinal() + 1)
        for start in range(0, len(days), ROLLUP_DAYS):
            _, live = self._read_days(days[start : start + ROLLUP_DAYS], summed=False)
            pending = [(d, found, uses) for d, (found, uses) in live.items() if uses]
            for day_, found, uses in pending:
                self._roll_up(day_, found, uses)
            if pending:
                return

    def item_report(
        self,
        begin: date,
        end: date,
        platform: str,
        created: datetime | None = None,
        describe: Callable[[str], counter.Described] | None = None,
    ) -> dict[str, Any]:
        """The COUNTER Item Report of the months `begin` to `end` (any day of each); its
        items described by `describe` (counter.describer), else named by their IBI."""
        self.flush()  # this process's own uses too
        first, last = begin.replace(day=1), end.replace(day=1)
        days = [
            date.fromordinal(n).isoformat()
            for n in range(first.toordinal(), counter.month_end(last).toordinal() + 1)
        ]
        months = self._day_figures(days)
        rows = {
            month: [(*key, *counts) for key, counts in months.get(month, {}).items()]
            for month in counter.months(first, last)
        }
        created = created or datetime.now(UTC)
        return counter.item_report(
            counter.figures(rows), first, last, platform, created, describe or counter.named_by_ibi
        )

    def record_use(self, seen: Seen) -> None:
        """Record one use for the COUNTER reports, later: it joins this process's buffer,
        which a thread of the process writes in batches (`flush`), so a download costs an
        append, not a write. Never blocks, never raises: a full buffer (the store down or
        not keeping up) drops the use and counts it (`uses_dropped`)."""
        now = self._clock()
        with _buffers_lock:
            if self._buffer_pid != os.getpid():  # the first use of this process
                self._buffer_pid = os.getpid()
                _buffered.add(self)
                _start_flusher()
            if len(self._buffer) >= BUFFER_MAX:
                self.uses_dropped += 1
                metrics.use("dropped")
                return
            self._buffer.append((now, seen))
            metrics.use("recorded")
            if len(self._buffer) == FLUSH_ROWS:
                _wake.set()

    def flush(self) -> None:
        """Write this process's buffered uses now (the flusher thread, a worker's exit, a
        reader of this store). Never raises for a storage problem: what could not be written
        stays buffered for the next try, up to BUFFER_MAX."""
        with self._flushing:
            with _buffers_lock:
                if self._buffer_pid != os.getpid() or not self._buffer:
                    return
                batch, self._buffer = self._buffer, []
            try:
                self._write_uses(batch)
            except self.storage_errors as exc:
                with _buffers_lock:
                    kept = batch + self._buffer
                    self.uses_dropped += max(0, len(kept) - BUFFER_MAX)
                    metrics.use("dropped", max(0, len(kept) - BUFFER_MAX))
                    self._buffer = kept[-BUFFER_MAX:] if len(kept) > BUFFER_MAX else kept
                self._uses_failed(exc)
                return
            with self._lock:
                self._recovered()
            self._maintain()

    def _write_uses(self, batch: list[tuple[float, Seen]]) -> None:
        """The buffered uses as rows: the user a hash of address and User-Agent under the
        salt of the use's UTC day, shared by every worker and node and deleted after it."""
        rows = []
        for t, seen in batch:
            day = _day(t)
            salt = self._salts.get(day)
            if salt is None:
                salt = self._salts[day] = self._day_salt(day, os.urandom(16))
                for old in sorted(self._salts)[:-2]:  # a batch may straddle midnight
                    del self._salts[old]
            user = hashlib.blake2b(
                f"{seen.client}\0{seen.agent or ''}".encode(errors="replace"),
                key=salt,
                digest_size=12,
            ).hexdigest()
            robot = seen.agent is not None and is_robot(seen.agent)
            rows.append((t, seen.ibi, seen.kind, user, robot, seen.access))
        self._insert_uses(rows)

    def _maintain(self) -> None:
        """Every PURGE_EVERY, after a batch: uses past the retention out, finished days
        rolled up."""
        now = self._clock()
        if now - self._uses_purged <= PURGE_EVERY:
            return
        self._uses_purged = now
        try:
            if self.retention_days:
                self._purge_uses(now - self.retention_days * 86400)
            self.roll_up()
        except (*self.storage_errors, StatsError) as exc:
            log.warning("COUNTER uses: cannot purge or roll up days in %s: %s", self.where(), exc)

    def _uses_failed(self, exc: Exception) -> None:
        now = time.monotonic()
        if now - self._uses_error_logged < ERROR_LOG_EVERY:
            return
        self._uses_error_logged = now
        log.error(
            "cannot record COUNTER uses in %s: %s; %d uses wait in this process, %d dropped "
            "so far (logged again at most once a minute)",
            self.where(),
            exc,
            len(self._buffer),
            self.uses_dropped,
        )

    def acknowledge(self, ack: Acknowledgment, keys: UrlKeys) -> str:
        """Count `ack` or refuse it; returns 'counted', a refusal reason, or 'unrecorded'
        when the store failed (logged). Never raises for a storage problem."""
        verdict = keys.verify(ack.urlkey, ack.url)
        reason = verdict.reason if not verdict.ok else "unknown" if ack.ibi is None else "valid"
        if not ack.from_resolver:  # its key stays unseen: the resolver's may still count
            reason = "not-resolver"
        now = self._clock()
        try:
            outcome = self._write(ack, reason, verdict, now, keys.lifetime)
        except self.storage_errors as exc:
            self._failed(exc)
            return "unrecorded"
        if outcome != "counted":
            self._note_refusal(outcome, ack.url)
        elif not ack.served_here:
            # The acknowledgment says a user was sent to the URL: a request when it is the
            # item's data, an investigation when it is its metadata (docs/counter.md).
            kind = counter.REQUEST if ack.contenttype == "Data" else counter.INVESTIGATION
            self.record_use(Seen(str(ack.ibi), kind, ack.client, None, ack.access))
        return outcome

    def _note_refusal(self, reason: str, url: str) -> None:
        # A flood of forged keys must not become a flood of log lines: the first refusal is
        # logged at once, later ones summed up at most once a minute (the database has them all).
        with self._lock:
            self._refused[reason] += 1
            self._last_refused = url[:200]
            now = time.monotonic()
            if self._refusals_logged and now - self._refusals_logged < REFUSAL_LOG_EVERY:
                return
            counts = ", ".join(f"{k} {v}" for k, v in sorted(self._refused.items()))
            total = sum(self._refused.values())
            first = not self._refusals_logged
            self._refused.clear()
            self._refusals_logged = now
            last = self._last_refused
        if first:
            log.info(
                "acknowledgment refused (%s): url=%r; further refusals are summed up "
                "at most once a minute",
                reason,
                last,
            )
        else:
            log.info("%d more acknowledgments refused (%s); the last: url=%r", total, counts, last)

    def _failed(self, exc: Exception) -> None:
        now = time.monotonic()
        with self._lock:
            self._unrecorded += 1
            first = self._problem is None
            if not first and now - self._error_logged < ERROR_LOG_EVERY:
                return
            self._error_logged = now
            if first:
                since = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
                self._problem = (
                    f"acknowledgments are not counted since {since}: cannot "
                    f"record them in {self.where()}: {exc}"
                )
            lost = self._unrecorded
        if first:
            log.error(
                "cannot record acknowledgment statistics in %s: %s. Acknowledgments are "
                "still answered but not counted until %s; this is logged again at most "
                "once a minute",
                self.where(),
                exc,
                self.remedy(),
            )
        else:
            log.error(
                "cannot record acknowledgment statistics in %s still: %s (%d "
                "acknowledgments not counted so far)",
                self.where(),
                exc,
                lost,
            )

    def _recovered(self) -> None:
        # Called with the lock held, after a successful write.
        if self._problem is not None:
            log.warning(
                "acknowledgment statistics are recorded in %s again; %d "
                "acknowledgments were not counted meanwhile",
                self.where(),
                self._unrecorded,
            )
            self._problem, self._unrecorded, self._error_logged = None, 0, 0.0

    def day_figures(self, day: date) -> dict[str, dict[str, int]]:
        """{ibi: {metric type: n}} of the uses of the UTC `day`, by the Code's rules
        (counter.month_query). A day's users are its own (the day's salt): no double-click or
        session spans two days, so the days of a month add up to the month."""
        self.flush()  # this process's own uses too
        counted = self._day_figures([day.isoformat()]).get(day.strftime("%Y-%m"), {})
        summed: dict[str, list[int]] = {}
        for (ibi, _access), counts in counted.items():  # an item's uses under any Access_Type
            total = summed.setdefault(ibi, [0] * len(counter.METRIC_TYPES))
            for i, n in enumerate(counts):
                total[i] += n
        return {
            ibi: {metric: n for metric, n in zip(counter.METRIC_TYPES, counts) if n}
            for ibi, counts in summed.items()
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
                spare = sqlite3.connect(self.path, timeout=1, isolation_level=None)
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
            conn = sqlite3.connect(f"file:{self.path}?mode=ro", uri=True, timeout=10)
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
            conn = sqlite3.connect(f"file:{self.path}?mode=ro", uri=True, timeout=10)
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
            conn = sqlite3.connect(f"file:{self.path}?mode=ro", uri=True, timeout=10)
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
        from ..common import postgres

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


def open_store(
    state_dir: str | os.PathLike,
    database: str = "",
    clock: Callable[[], float] = time.time,
    retention_days: int = 0,
) -> Statistics:
    """The Archive's statistics: in `database` when it names one (shared by every node),
    else in SQLite in `state_dir`. Uses older than `retention_days` are deleted (0: kept)."""
    if database:
        return PostgresStore(database, clock, retention_days)
    return Store(state_dir, clock, retention_days)


def build_report(counts, rejected, since: date | None, top: int | None) -> dict[str, Any]:
    by_type: Counter = Counter()
    by_state: Counter = Counter()
    days: dict[str, Counter] = defaultdict(Counter)
    items: dict[str, Counter] = defaultdict(Counter)
    for day, ibi, contenttype, state, n in counts:
        by_type[contenttype] += n
        by_state[state] += n
        days[day]["count"] += n
        items[ibi]["count"] += n
        items[ibi][contenttype] += n
        items[ibi][state] += n
    reasons: Counter = Counter()
    for day, reason, n in rejected:
        reasons[reason] += n
        days[day]["rejected"] += n
    ranked = sorted(items.items(), key=lambda kv: (-kv[1]["count"], kv[0]))
    if top:
        ranked = ranked[:top]
    return {
        "since": since.isoformat() if since else None,
        "total": sum(by_type.values()),
        "rejected": sum(reasons.values()),
        "rejected_by_reason": dict(sorted(reasons.items())),
        "by_contenttype": dict(sorted(by_type.items())),
        "by_state": dict(sorted(by_state.items())),
        "days": [
            {"day": d, "count": c["count"], "rejected": c["rejected"]}
            for d, c in sorted(days.items())
        ],
        "items": [
            {
                "ibi": ibi,
                "count": c["count"],
                "by_contenttype": {k: c[k] for k in ("Data", "Metadata") if c[k]},
                "by_state": {k: c[k] for k in ("Original", "Copy") if c[k]},
            }
            for ibi, c in ranked
        ],
    }


def rows(report: dict[str, Any]) -> list[list[Any]]:
    """The report as CSV rows: kind, key, count (a flat form spreadsheets read)."""
    out: list[list[Any]] = [
        ["section", "key", "count"],
        ["total", "", report["total"]],
        ["rejected", "", report["rejected"]],
    ]
    out += [["rejected_by_reason", k, v] for k, v in report["rejected_by_reason"].items()]
    out += [["contenttype", k, v] for k, v in report["by_contenttype"].items()]
    out += [["state", k, v] for k, v in report["by_state"].items()]
    out += [["day", d["day"], d["count"]] for d in report["days"]]
    out += [["item", i["ibi"], i["count"]] for i in report["items"]]
    return out


def table(report: dict[str, Any]) -> str:
    """The report for people."""
    lines = [
        f"acknowledgments counted: {report['total']}"
        + (f" since {report['since']}" if report["since"] else "")
    ]
    reasons = ", ".join(f"{k} {v}" for k, v in report["rejected_by_reason"].items())
    lines.append(f"refused: {report['rejected']}" + (f" ({reasons})" if reasons else ""))
    for title, key in (("by contenttype", "by_contenttype"), ("by state", "by_state")):
        if report[key]:
            lines.append(f"{title}: " + ", ".join(f"{k} {v}" for k, v in report[key].items()))
    if report["days"]:
        lines += ["", f"{'day':<12}{'counted':>9}{'refused':>9}"]
        lines += [f"{d['day']:<12}{d['count']:>9}{d['rejected']:>9}" for d in report["days"]]
    if report["items"]:
        lines += ["", f"{'counted':>8} {'Data':>6} {'Meta':>6} {'Orig':>6} {'Copy':>6}  item"]
        for i in report["items"]:
            t, s = i["by_contenttype"], i["by_state"]
            lines.append(
                f"{i['count']:>8} {t.get('Data', 0):>6} {t.get('Metadata', 0):>6} "
                f"{s.get('Original', 0):>6} {s.get('Copy', 0):>6}  {i['ibi']}"
            )
    return "\n".join(lines)
