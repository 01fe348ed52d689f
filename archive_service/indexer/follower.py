"""In each serving worker: make sure this collection's indexer process runs (see watch.py).

The first worker to take the store's watch lock starts `archive-service index --watch` and
hands it the lock; the others stand by and replace a dead indexer within FOLLOW_SECONDS.
The indexer holds the read end of a pipe whose write end only the worker that started it
has, so it stops when that worker does."""

from __future__ import annotations

import atexit
import logging
import os
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path

from .. import settings
from ..common.files import replace_file
from ..common.processes import child_environment, python_executable
from ..index.store import Store

log = logging.getLogger(__name__)

FOLLOW_SECONDS = 1.0  # how often a serving process checks that the indexer runs
REPEAT_SECONDS = 600.0  # how often a serving process repeats why it cannot start the indexer
# An indexer started more often than this within STARTS_WINDOW seconds keeps stopping (a
# crash at start-up, or on something it reads): /health fails until it has run a window
# through. Serve's start and a SIGHUP or two start one each, a crash loop one a second.
MAX_STARTS = 6
STARTS_WINDOW = 60.0


def _starts_path(store: Store) -> Path:
    return Path(f"{store.path}.starts")


def _recent_starts(store: Store, now: float) -> list[float]:
    """When the indexer of `store` was started within the window before `now` (seconds
    since the epoch: several processes write and read them), as the Followers noted."""
    try:
        text = _starts_path(store).read_text(encoding="ascii")
    except (OSError, UnicodeDecodeError):
        return []
    started = []
    for word in text.split():
        try:
            moment = float(word)
        except ValueError:
            continue
        if now - STARTS_WINDOW < moment <= now:
            started.append(moment)
    return started


def note_start(store: Store) -> None:
    """Beside the index: an indexer of `store` was started now (by whoever holds the watch
    lock, so by one process at a time)."""
    now = time.time()
    starts = [*_recent_starts(store, now), now]
    try:
        replace_file(_starts_path(store), "".join(f"{t:.3f}\n" for t in starts[-MAX_STARTS * 2 :]))
    except OSError:
        pass  # a state directory that takes no writes fails /health already


def restarting(store: Store) -> str | None:
    """Why the indexer of `store` is failing, for /health: started more than MAX_STARTS
    times within STARTS_WINDOW seconds; else None. Each worker that answers /health asks
    this, whichever started the indexer: the starts are kept in a file beside the index."""
    starts = len(_recent_starts(store, time.time()))
    if starts <= MAX_STARTS:
        return None
    return (
        f"the indexer was started {starts} times in the last {STARTS_WINDOW:g} s: it keeps "
        "stopping (see the log); the index is not kept current"
    )


class Follower:
    """In a serving process: make sure this collection's indexer process runs."""

    def __init__(self, store: Store, config: settings.Config):
        self.store = store
        self.config = config
        self._lock = threading.Lock()
        self._pid: int | None = None
        self._stop = threading.Event()
        self._proc: subprocess.Popen | None = None
        self._owner: int | None = None

    def start(self, wanted: Callable[[], bool] = lambda: True) -> None:
        """Start following (once per process; call it after gunicorn forks, never before),
        for as long as `wanted()` (a serving process that is stopping starts no indexer)."""
        if self._pid not in (None, os.getpid()):
            self._lock = threading.Lock()  # forked: the parent's threads (and locks) stayed there
        with self._lock:
            if self._pid == os.getpid():
                return
            self._pid = os.getpid()
            self._stop = threading.Event()
            self._proc, self._owner = None, None  # a parent's, if we were forked
            thread = threading.Thread(
                target=self._run, args=(wanted,), name="archive-service-follower", daemon=True
            )
            thread.start()
            atexit.register(self.stop)

    def stop(self, timeout: float = 5.0) -> None:
        """Stop following and stop the indexer this process started, if any."""
        if self._pid != os.getpid():
            return
        self._stop.set()
        with self._lock:
            proc, self._proc = self._proc, None
            self._close_owner()
        if proc is not None:
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()

    @property
    def indexer_pid(self) -> int | None:
        proc = self._proc
        return proc.pid if proc is not None else None

    def _close_owner(self) -> None:
        if self._owner is not None:
            os.close(self._owner)  # the indexer reads end-of-file and stops
            self._owner = None

    def _run(self, wanted: Callable[[], bool]) -> None:
        said, said_at = None, 0.0
        while not self._stop.is_set() and wanted():
            try:
                with self._lock:
                    if not self._stop.is_set() and wanted():
                        self._tend()
            except Exception as exc:  # keep trying: the service answers from the index meanwhile
                # Said once, and again every REPEAT_SECONDS or when the reason changes: a
                # read-only state directory fails here every second, in every standby worker.
                why = f"{exc}" if isinstance(exc, OSError) else f"{type(exc).__name__}: {exc}"
                if why != said or time.monotonic() - said_at >= REPEAT_SECONDS:
                    log.error(
                        "cannot start the indexer of %s (%s); trying again every %g s, "
                        "saying so every %g s",
                        self.store.root,
                        why,
                        FOLLOW_SECONDS,
                        REPEAT_SECONDS,
                        exc_info=not isinstance(exc, OSError),
                    )
                    said, said_at = why, time.monotonic()
            else:
                said = None
            self._stop.wait(FOLLOW_SECONDS)

    def _tend(self) -> None:
        if self._proc is not None:
            code = self._proc.poll()
            if code is None:
                return
            (log.warning if code else log.info)(
                "the indexer of %s (pid %d) exited with status %d",
                self.store.root,
                self._proc.pid,
                code,
            )
            self._proc = None
            self._close_owner()
        fd = self.store.try_watch_lock()
        if fd is None:
            return  # another process's indexer runs
        try:
            self._spawn(fd)
        finally:
            os.close(fd)  # the indexer holds the lock now (the same open file)

    def _spawn(self, lock_fd: int) -> None:
        read_end, write_end = os.pipe()
        config = self.config
        command = [
            python_executable(),
            "-m",
            "archive_service.cli",
            "index",
            "--watch",
            "--collection",
            str(self.store.root),
            "--state-dir",
            str(self.store.state_dir),
            "--index-watch",
            config.index_watch,
            "--rescan-interval",
            f"{config.rescan_interval:g}",
            "--consistency-interval",
            f"{config.consistency_interval:g}",
            "--lock-fd",
            str(lock_fd),
            "--owner-fd",
            str(read_end),
        ]
        try:
            # In a process group of its own: a terminal's Ctrl-C is for `serve`, whose
            # exit stops the indexer through the pipe; it reached the indexer too, and broke
            # its start-up with a KeyboardInterrupt traceback.
            self._proc = subprocess.Popen(
                command,
                pass_fds=(lock_fd, read_end),
                stdin=subprocess.DEVNULL,
                env=child_environment(),
                process_group=0,
            )
        except BaseException:
            os.close(write_end)
            raise
        finally:
            os.close(read_end)
        self._owner = write_end
        note_start(self.store)
        log.info("started the indexer of %s (pid %d)", self.store.root, self._proc.pid)
