"""Acknowledgments (Table 6.11) sent after the user has been redirected, off the resolution's
path: a bounded queue served by a few threads of each process, with retries and counted drops."""

from __future__ import annotations

import heapq
import logging
import threading
import time
from collections import Counter, deque
from collections.abc import Mapping

from ..common.processes import own_pid
from . import metrics
from .archives import ArchiveClient, ArchiveError
from .resolve import ArchiveRef

log = logging.getLogger(__name__)


class Acknowledgments:
    """Acknowledgments sent after the user has been redirected, off the resolution's path.

    A bounded queue (`size` waiting) served by SENDERS threads of this process (started on
    first use, so after gunicorn's fork); one that gets no answer is sent again after
    BACKOFF, 2 x BACKOFF, … up to RETRIES times. When the queue is full or the retries are
    spent it is dropped: counted (`counts()`, shown on /health) and logged, never waited on.
    An acknowledgment only feeds the Archive's statistics; the user has their URL. A
    stopping worker sends what is still queued (`drain`, from gunicorn's worker_exit).

    No Archive has more than half of either: PER_ARCHIVE senders at once (the others wait,
    parked, for one of its own to end) and half the queue. An included Archive that answered
    its acknowledgments just inside the timeout held every sender with 2 a second, and the
    other Archives' waited behind them: half never sent within 25 s, the rest 6 s late and
    later, until the queue was full and dropped them (issue 30's second adversarial pass).
    An Archive is counted by its service IBI (`ArchiveRef.key`), not its address: one that
    announced itself again under a second address held every sender (the last pass).

    Both halves are counted in acknowledgments and in characters (SIZE_EACH per place in the
    queue): a hostile included Archive's answer carries a `urlkey` (or `state`, …) of up to
    its 64 KiB cap, and each resolution of its items queued that much; while its senders
    were held, 5,000 of them kept 294 MB in a worker (the seventh adversarial pass)."""

    SENDERS = 8
    PER_ARCHIVE = SENDERS // 2
    RETRIES = 3
    BACKOFF = 0.25  # seconds before the first retry; doubled for each next one
    # Characters of the queue per acknowledgment it holds (`size`): one is ~0.3-1.5 KB (two
    # URLs, a urlkey of 21 digits per URL answered, the Via it continues).
    SIZE_EACH = 2048

    def __init__(self, client: ArchiveClient, size: int):
        self.client = client
        self.size = size
        self.share = max(1, size // 2)  # of the queue, for any one Archive
        self.room = size * self.SIZE_EACH  # characters of the acknowledgments waiting
        lock = threading.Lock()
        self._cond = threading.Condition(lock)  # the senders wait on it for work
        self._settled = threading.Condition(lock)  # `drain` waits on it for an end
        self._waiting: list[tuple[float, int, int, ArchiveRef, dict, str]] = []  # a heap
        self._parked: dict[str, deque] = {}  # by Archive: due, but its senders are busy
        self._busy: Counter[str] = Counter()  # by Archive: being sent now
        self._held: Counter[str] = Counter()  # by Archive: waiting, in the heap or parked
        self._chars: Counter[str] = Counter()  # by Archive: the characters of those waiting
        self._seq = 0
        self._pid = 0
        self._counts = dict.fromkeys(("queued", "sent", "unexpected", "retried", "dropped"), 0)

    def counts(self) -> dict[str, int]:
        with self._cond:
            return {**self._counts, "waiting": self._held.total()}

    def put(self, archive: ArchiveRef, params: Mapping[str, str], via: str = "") -> bool:
        """Queue one acknowledgment; False (counted, logged) when the queue is full."""
        with self._cond:
            if self._pid != own_pid():  # first use in this process (or a fork's copy)
                self._waiting.clear()
                self._parked.clear()
                self._busy.clear()
                self._held.clear()
                self._chars.clear()
                self._pid = own_pid()
                for i in range(self.SENDERS):
                    threading.Thread(
                        target=self._send, name=f"acknowledgment-{i}", daemon=True
                    ).start()
            self._counts["queued"] += 1
            metrics.acknowledgment("queued")
            return self._push(0.0, 0, archive, dict(params), via)

    def _push(self, due: float, attempt: int, archive, params, via) -> bool:
        waiting, own = self._held.total(), self._held[archive.key]
        chars = _chars(params, via)
        if (
            waiting >= self.size
            or own >= self.share
            or self._chars.total() + chars > self.room
            or self._chars[archive.key] + chars > self.room // 2
        ):
            self._counts["dropped"] += 1
            metrics.acknowledgment("dropped")
            log.warning(
                # The URL cut as the answer's dropped URLs are (resolve.py): a line per
                # resolution of a hostile Archive's items, each URL up to 8 KB otherwise.
                "acknowledgment dropped for %s (%.200s): %d waiting already, %d of them for it",
                archive,
                params.get("url", ""),
                waiting,
                own,
            )
            return False
        self._seq += 1
        self._held[archive.key] += 1
        self._chars[archive.key] += chars
        heapq.heappush(self._waiting, (due, self._seq, attempt, archive, params, via))
        metrics.waiting(1)
        self._cond.notify()
        return True

    def _take(self) -> tuple | None:
        """The first acknowledgment due whose Archive has a sender free (under the lock);
        those due for an Archive whose senders are all busy are parked meanwhile."""
        now = time.monotonic()
        while self._waiting and self._waiting[0][0] <= now:
            entry = heapq.heappop(self._waiting)
            whose = entry[3].key
            if self._busy[whose] >= self.PER_ARCHIVE:
                self._parked.setdefault(whose, deque()).append(entry)
                continue
            self._busy[whose] += 1
            self._held[whose] -= 1
            self._chars[whose] -= _chars(entry[4], entry[5])
            metrics.waiting(-1)
            return entry
        return None

    def _done(self, whose: str) -> None:
        """A sender of the Archive `whose` (its key) is free (under the lock): its next parked
        one is due again."""
        self._busy[whose] -= 1
        self._settled.notify_all()
        parked = self._parked.get(whose)
        if parked:
            heapq.heappush(self._waiting, parked.popleft())
            if not parked:
                del self._parked[whose]
            self._cond.notify()

    def drain(self, within: float) -> int:
        """Wait up to `within` seconds for this process's acknowledgments to be sent (a
        worker's graceful stop: its sender threads die with it); the number left unsent."""
        end = time.monotonic() + within
        with self._cond:
            if self._pid != own_pid():
                return 0  # none was queued in this process
            while self._held.total() or self._busy.total():
                left = end - time.monotonic()
                if left <= 0:
                    break
                self._settled.wait(left)
            unsent = self._held.total() + self._busy.total()
        if unsent:
            log.warning("%d acknowledgment(s) not sent: the worker stopped", unsent)
        return unsent

    def _send(self) -> None:
        while True:
            with self._cond:
                while (entry := self._take()) is None:
                    wait = self._waiting[0][0] - time.monotonic() if self._waiting else None
                    self._cond.wait(wait)
            _, _, attempt, archive, params, via = entry
            try:
                done = self._send_one(attempt, archive, params, via)
            finally:
                with self._cond:
                    self._done(archive.key)
            if done is not None:
                with self._cond:
                    self._counts[done] += 1
                    metrics.acknowledgment(done)

    def _send_one(self, attempt: int, archive: ArchiveRef, params: dict, via: str) -> str | None:
        """Send one: what became of it, None when it waits for another try."""
        try:
            return "sent" if self.client.acknowledge(archive, params, via) else "unexpected"
        except ArchiveError as exc:
            with self._cond:
                if attempt < self.RETRIES:
                    self._counts["retried"] += 1
                    metrics.acknowledgment("retried")
                    due = time.monotonic() + self.BACKOFF * 2**attempt
                    self._push(due, attempt + 1, archive, params, via)
                    return None
            log.warning(
                "acknowledgment dropped for %s after %d attempts: %s", archive, attempt + 1, exc
            )
            return "dropped"
        except Exception:  # a sender must outlive any one acknowledgment
            log.exception("acknowledgment to %s failed", archive)
            return "dropped"


def _chars(params: Mapping[str, str], via: str) -> int:
    """What an acknowledgment waiting holds, in characters (its Python objects' overhead aside)."""
    return len(via) + sum(len(name) + len(value) for name, value in params.items())
