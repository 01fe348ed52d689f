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

Storage, one module per store: `sqlite.Store` (the default: `<state_dir>/stats.sqlite3`, WAL,
one short IMMEDIATE transaction per acknowledgment, so any number of workers and `archive-service
stats` reading share it) and `postgres.PostgresStore` (the `database` setting: the same tables
prefixed `stats_`, shared by every node; the primary key of the seen heads is what makes
"counted once" hold across nodes). `open_store` picks one; both stand behind `Statistics`,
which holds what a refusal is and how failures are logged. No Flask here.

For COUNTER (stores/stats/counter.py, docs/counter.md) the same stores keep `uses`: one row
per use (`record_use`: a /col/ file, file list or metadata page served, or an acknowledgment
counted) with its time, item, kind, robot flag and a user that is a hash of client address and
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
import re
import threading
import time
import weakref
from collections import Counter, defaultdict
from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass, replace
from datetime import UTC, date, datetime
from typing import Any

from ...common.metrics import Metric
from ...protocol.urlkeys import UrlKeys, Verdict
from . import counter

# The name the log lines have always carried (this was web/stats.py): admins' filters know it.
log = logging.getLogger("archive_service.web.stats")

# Counted here, where a use is buffered or dropped; exposed with the Archive's other metrics
# (web/metrics.py, docs/metrics.md).
USES = Metric(
    "Counter",
    "archive_service_counter_uses",
    "COUNTER uses by result: recorded (buffered to be written) or dropped (buffer full)",
    ("result",),
)

PURGE_EVERY = 600  # seconds between purges of expired `seen_keys` rows, per process
ERROR_LOG_EVERY = 60  # seconds between two logs of a failing store, per process
REFUSAL_LOG_EVERY = 60  # seconds between two summaries of refused acknowledgments, per process
REASONS = ("not-resolver", "malformed", "future", "expired", "forged", "unknown", "replay")


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


# Characters of a User-Agent matched against the list and kept for a use's user (`record_use`):
# browsers' and robots' are shorter.
# The list's 360 alternatives cost ~8 us a character: a client's 8 KB agents, each new,
# cost the use writer 18-65 ms each (a /col/ file 1 ms) and kept 33 MB in the cache of
# 4,096 (issue 30, fourth adversarial pass); 512 characters cost at most ~4 ms.
ROBOT_AGENT = 512


def is_robot(agent: str) -> bool:
    """The COUNTER robots list matches `agent`'s first ROBOT_AGENT characters."""
    return _is_robot(agent[:ROBOT_AGENT])


@functools.lru_cache(maxsize=4096)  # a few User-Agents make most of the uses
def _is_robot(agent: str) -> bool:
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

# Two subqueries, not min(t), max(t): each then reads one end of the index on t.
BOUNDS = "SELECT (SELECT min(t) FROM {table}), (SELECT max(t) FROM {table})"
# ROLLED: the kept figures of the days still marked done only. A late batch (another node's,
# another worker's) deletes a day's mark but not its figures, and the day is then computed
# from its uses: adding the figures too counted it twice until it was rolled up again. The
# marks are asked within the days too: SQLite walked every marked day's figures and then
# dropped those outside, so each month asked read every figure ever kept (issue 30, seventh
# pass: 43 such reads a statistics page, ~1 s at one month of 100,000 kept rows).
ROLLED = """
SELECT substr(day, 1, 7), ibi, access, sum(investigations), sum(unique_investigations),
    sum(requests), sum(unique_requests)
FROM {table} WHERE day >= {param} AND day <= {param}
    AND day IN (SELECT day FROM {table}_done WHERE day >= {param} AND day <= {param})
GROUP BY substr(day, 1, 7), ibi, access
"""
DONE = "SELECT day FROM {table}_done WHERE day >= {param} AND day <= {param}"


# What shows a report's progress, day by day (`item_report(progress=)`): set for the call,
# so both stores' day loops report it without each passing it down.
_PROGRESS: ContextVar[Callable[[int, int], None] | None] = ContextVar("progress", default=None)


def _days_from(conn, days: list[str], sql: dict[str, str], kept: bool, summed: bool):
    """`Statistics._read_days` from `conn`'s snapshot, in a store's dialect (`sql`);
    `kept` False: the store has no table of kept days yet."""
    first_last = (days[0], days[-1])
    done = {d for (d,) in conn.execute(sql["done"], first_last)} if kept else set()
    rolled = conn.execute(sql["rolled"], first_last * 2).fetchall() if kept and summed else []
    # No use outside the days of the first and last one kept: those days are not asked one
    # by one (an Item Report from 1970-01 was 20,000 queries, 1.5 s of PostgreSQL, a GET).
    first, last = conn.execute(sql["bounds"]).fetchone()
    used = (_day(first), _day(last)) if first is not None else ("~", "")
    live = {}
    shown = _PROGRESS.get()
    for n, day in enumerate(days, 1):
        if shown is not None:
            shown(n, len(days))
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
        progress: Callable[[int, int], None] | None = None,
    ) -> dict[str, Any]:
        """The COUNTER Item Report of the months `begin` to `end` (any day of each); its
        items described by `describe` (counter.describer), else named by their IBI;
        `progress(done, total)` told of each day read."""
        token = _PROGRESS.set(progress)
        try:
            return self._item_report(begin, end, platform, created, describe)
        finally:
            _PROGRESS.reset(token)

    def _item_report(self, begin, end, platform, created, describe) -> dict[str, Any]:
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
        if seen.agent and len(seen.agent) > ROBOT_AGENT:
            # What is_robot reads, and the user's hash with it: BUFFER_MAX uses of 8 KB
            # agents, buffered while the store is down, were 820 MB a worker.
            seen = replace(seen, agent=seen.agent[:ROBOT_AGENT])
        with _buffers_lock:
            if self._buffer_pid != os.getpid():  # the first use of this process
                self._buffer_pid = os.getpid()
                _buffered.add(self)
                _start_flusher()
            if len(self._buffer) >= BUFFER_MAX:
                self.uses_dropped += 1
                USES.labels("dropped").inc()
                return
            self._buffer.append((now, seen))
            USES.labels("recorded").inc()
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
                    USES.labels("dropped").inc(max(0, len(kept) - BUFFER_MAX))
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


# The backends and the report's forms, under the names callers have always used (stats.Store):
# imported last, as they build on what is defined above.
from .postgres import PostgresStore  # noqa: E402
from .report import build_report, rows, table  # noqa: E402
from .sqlite import DB_FILE, SEEN_TABLE, Store  # noqa: E402

__all__ = [
    "DB_FILE",
    "SEEN_TABLE",
    "Acknowledgment",
    "PostgresStore",
    "Seen",
    "Statistics",
    "StatsError",
    "Store",
    "build_report",
    "flush_all",
    "is_robot",
    "open_store",
    "rows",
    "table",
]
