"""Acknowledgments (Table 6.11) sent after the user has been redirected, off the resolution's
path: a bounded queue served by a few threads of each process, with retries and counted drops."""

from __future__ import annotations

import heapq
import logging
import os
import threading
import time
from collections.abc import Mapping

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
    An acknowledgment only feeds the Archive's statistics; the user has their URL."""

    SENDERS = 4
    RETRIES = 3
    BACKOFF = 0.25  # seconds before the first retry; doubled for each next one

    def __init__(self, client: ArchiveClient, size: int):
        self.client = client
        self.size = size
        lock = threading.Lock()
        self._cond = threading.Condition(lock)  # the senders wait on it for work
        self._settled = threading.Condition(lock)  # `drain` waits on it for an end
        self._sending = 0
        self._waiting: list[tuple[float, int, int, ArchiveRef, dict, str]] = []  # a heap
        self._seq = 0
        self._pid = 0
        self._counts = dict.fromkeys(("queued", "sent", "unexpected", "retried", "dropped"), 0)

    def counts(self) -> dict[str, int]:
        with self._cond:
            return {**self._counts, "waiting": len(self._waiting)}

    def put(self, archive: ArchiveRef, params: Mapping[str, str], via: str = "") -> bool:
        """Queue one acknowledgment; False (counted, logged) when the queue is full."""
        with self._cond:
            if self._pid != os.getpid():  # first use in this process (or a fork's copy)
                self._waiting.clear()
                self._pid = os.getpid()
                for i in range(self.SENDERS):
                    threading.Thread(
                        target=self._send, name=f"acknowledgment-{i}", daemon=True
                    ).start()
            self._counts["queued"] += 1
            metrics.acknowledgment("queued")
            return self._push(0.0, 0, archive, dict(params), via)

    def _push(self, due: float, attempt: int, archive, params, via) -> bool:
        if len(self._waiting) >= self.size:
            self._counts["dropped"] += 1
            metrics.acknowledgment("dropped")
            log.warning(
                "acknowledgment dropped for %s (%s): %d waiting already",
                archive,
                params.get("url", ""),
                len(self._waiting),
            )
            return False
        self._seq += 1
        heapq.heappush(self._waiting, (due, self._seq, attempt, archive, params, via))
        metrics.waiting(1)
        self._cond.notify()
        return True

    def _send(self) -> None:
        while True:
            with self._cond:
                while not self._waiting or self._waiting[0][0] > time.monotonic():
                    wait = self._waiting[0][0] - time.monotonic() if self._waiting else None
                    self._cond.wait(wait)
                _, _, attempt, archive, params, via = heapq.heappop(self._waiting)
                metrics.waiting(-1)
                self._sending += 1
            try:
                self._send_one(attempt, archive, params, via)
            finally:
                with self._cond:
                    self._sending -= 1
                    self._settled.notify_all()

    def drain(self, within: float) -> int:
        """Wait up to `within` seconds for this process's acknowledgments to be sent (a
        worker's graceful stop: its sender threads die with it); the number left unsent."""
        end = time.monotonic() + within
        with self._cond:
            if self._pid != os.getpid():
                return 0  # none was queued in this process
            while self._waiting or self._sending:
                left = end - time.monotonic()
                if left <= 0:
                    break
                self._settled.wait(left)
            unsent = len(self._waiting) + self._sending
        if unsent:
            log.warning("%d acknowledgment(s) not sent: the worker stopped", unsent)
        return unsent

    def _send_one(self, attempt: int, archive: ArchiveRef, params: dict, via: str) -> None:
        try:
            done = "sent" if self.client.acknowledge(archive, params, via) else "unexpected"
        except ArchiveError as exc:
            with self._cond:
                if attempt < self.RETRIES:
                    self._counts["retried"] += 1
                    metrics.acknowledgment("retried")
                    due = time.monotonic() + self.BACKOFF * 2**attempt
                    self._push(due, attempt + 1, archive, params, via)
                else:
                    self._counts["dropped"] += 1
                    metrics.acknowledgment("dropped")
                    log.warning(
                        "acknowledgment dropped for %s after %d attempts: %s",
                        archive,
                        attempt + 1,
                        exc,
                    )
            return
        except Exception:  # a sender must outlive any one acknowledgment
            log.exception("acknowledgment to %s failed", archive)
            done = "dropped"
        with self._cond:
            self._counts[done] += 1
            metrics.acknowledgment(done)
