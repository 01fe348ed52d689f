"""Page work kept from starving the protocol: at most so many page requests at once in each
worker; past that, after a short wait at most, 503 with Retry-After.

The pages (the item list and its search, statistics, the COUNTER API, file lists) cost from
a millisecond to tens (a rare word's search reads 20,000 rows: 40-55 ms); the protocol's
answers cost a millisecond or less and are what the resolution system waits for. Without a
bound, 64 clients searching held every thread and the CPU, and urlRequest's median rose to
2.1 s. The service path is answered before this (web.ServiceEndpoint), and /col/ files and
/health pass through unbounded: files are what the protocol's answers point to, and health
must answer under load. A page that finds no slot free waits for one a moment, as long as
few others wait: at most half of the threads make or wait for pages."""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor

from .headers import NOSNIFF

BODY = b"This Archive is busy making pages: try again in a moment.\n"
RETRY_AFTER = "1"  # seconds: a page takes tens of milliseconds
WAIT = 0.5  # seconds a page waits for a slot, at most, in the waiting room
PAGE_NICE = 10  # the page threads' nice: a tenth of the CPU a protocol thread gets, contended


def page_slots(page_concurrency: int, threads: int) -> int:
    """How many page requests a worker makes at once: the setting (0: one for each 16
    threads, so one with the default 16), never all of them, so that a thread is left for
    the protocol."""
    wanted = page_concurrency or threads // 16
    return max(1, min(wanted, threads - 1))


def waiting_room(slots: int, threads: int) -> int:
    """How many page requests may wait for a slot (a burst of cheap pages is made, not
    refused): what the slots leave of half the threads; the other half is the protocol's."""
    return max(0, threads // 2 - slots)


class PageLimit:
    """WSGI middleware: requests whose path `bounded(path)` says is page work take one of
    `slots`, waiting up to WAIT seconds when `waiting` others do not already; else they are
    answered 503 with Retry-After."""

    def __init__(self, app, slots: int, bounded: Callable[[str], bool], waiting: int = 0):
        self.app = app
        self.bounded = bounded
        self.slots = threading.BoundedSemaphore(slots)
        self.room = threading.BoundedSemaphore(waiting) if waiting else None
        self.makers = _PageThreads(slots)

    def __call__(self, environ, start_response) -> Iterable[bytes]:
        if not self.bounded(environ.get("PATH_INFO", "")):
            return self.app(environ, start_response)
        if not self._take():
            start_response(
                "503 Service Unavailable",
                [
                    ("Content-Type", "text/plain; charset=utf-8"),
                    ("Content-Length", str(len(BODY))),
                    ("Retry-After", RETRY_AFTER),
                    ("Cache-Control", "no-store"),
                    NOSNIFF,
                ],
            )
            return [] if environ.get("REQUEST_METHOD") == "HEAD" else [BODY]
        try:
            # A page is made whole on a page thread before it is returned: a streamed body
            # (a sitemap) read later would do its work past the bound, on a thread of the
            # protocol's priority.
            return self.makers.run(_made_whole, self.app, environ, start_response)
        finally:
            self.slots.release()

    def _take(self) -> bool:
        """A slot: free now, or within WAIT when there is room to wait."""
        if self.slots.acquire(blocking=False):
            return True
        if self.room is None or not self.room.acquire(blocking=False):
            return False
        try:
            return self.slots.acquire(timeout=WAIT)
        finally:
            self.room.release()


class _PageThreads:
    """The threads of a worker that make its pages, at a lower CPU priority than the threads
    answering the protocol: a slot bounds how many pages take a CPU at once, this how much
    of it they take while the protocol wants it (a thread's nice is its own on Linux; a
    thread cannot lower it back unprivileged, hence threads of their own). Made on first
    use, in the worker: no thread starts before gunicorn forks."""

    def __init__(self, size: int):
        self.size = size
        self.lock = threading.Lock()
        self.pool: ThreadPoolExecutor | None = None
        self.pid = 0

    def run(self, make, *args):
        if self.pid != os.getpid():
            with self.lock:
                if self.pid != os.getpid():
                    self.pool = ThreadPoolExecutor(
                        self.size, thread_name_prefix="pages", initializer=_lower_priority
                    )
                    self.pid = os.getpid()
        return self.pool.submit(make, *args).result()


def _made_whole(app, environ, start_response) -> list[bytes]:
    """`app`'s answer with its whole body read (and the iterable closed, as WSGI asks)."""
    body = app(environ, start_response)
    try:
        return [b"".join(body)]
    finally:
        close = getattr(body, "close", None)
        if close is not None:
            close()


def _lower_priority() -> None:
    if sys.platform == "linux":  # elsewhere the nice is the whole process's
        try:
            os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), PAGE_NICE)
        except OSError:
            pass  # a page at the protocol's priority is still bounded by its slot


def of_archive(app, config, service_path: str) -> PageLimit:
    """The Archive's `app` with its page work bounded: every path but /col/ files and
    /health (at the root and under the service path)."""
    exempt = ("/col", "/health", service_path + "/health")

    def bounded(path: str) -> bool:
        return not any(path == e or path.startswith(e + "/") for e in exempt)

    slots = page_slots(config.page_concurrency, config.threads)
    return PageLimit(app, slots, bounded, waiting_room(slots, config.threads))
