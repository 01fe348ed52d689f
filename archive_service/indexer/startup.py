"""What a serving app holds of the index, and how serving starts: the early walk forked
before gunicorn loads (refresh_early), the state directory or its private fallback, and
LiveIndex (brought up to date when the app is made, then followed by the indexer)."""

from __future__ import annotations

import logging
import os
import signal
import sqlite3
import tempfile
from collections import Counter
from collections.abc import Callable

from .. import settings
from ..collection import items
from ..index.catalog import StoreCatalog
from ..index.store import Store, Writer
from .follower import Follower

log = logging.getLogger(__name__)


def _state_dir_problem(state_dir: str) -> str | None:
    """Why `state_dir` cannot hold the index (creating it if missing), or None."""
    try:
        os.makedirs(state_dir, mode=0o700, exist_ok=True)
    except OSError as exc:
        return exc.strerror or str(exc)
    return None if os.access(state_dir, os.W_OK | os.X_OK) else "not writable"


def usable_state_dir(state_dir: str) -> str:
    """`state_dir`, or a private temporary one (with a warning) if it cannot be written."""
    problem = _state_dir_problem(state_dir)
    if problem is None:
        return state_dir
    fallback = private_state_dir()
    log.warning(
        "state_dir %s cannot be used (%s); keeping the index in %s instead",
        state_dir,
        problem,
        fallback,
    )
    return fallback


def private_state_dir() -> str:
    path = os.path.join(tempfile.gettempdir(), f"archive-service-{os.getuid()}")
    os.makedirs(path, mode=0o700, exist_ok=True)
    return path


# Index paths -> (pid, whether serving waits for it) of a process this one forked to bring
# that index up to date.
_early: dict[str, tuple[int, bool]] = {}
_unwaited: set[int] = set()  # those that run on while serving


def refresh_early(config: settings.Config) -> None:
    """Start bringing the index of `config` up to date in a forked process, for `serve`. Call
    it before any thread starts.

    A complete index is served at once, as it was left, while that process walks the
    collection and commits what changed while the service was stopped (workers see each
    commit, as they see the indexer's): a restart answered in 0.2 s at 10,000 items and 0.9 s
    at 1,000,000, where waiting for the walk took 96 s. Without a complete index there is
    nothing to answer from: LiveIndex.refresh() waits for the walk (the build), which runs
    while this process imports the web framework and the server. Whatever changes during the
    walk is the indexer's to find, as on any start: its first rescan follows the setting of
    its watches."""
    if _state_dir_problem(config.state_dir) or not os.path.isdir(config.collection):
        return  # LiveIndex says what is wrong (and where it keeps the index instead)
    store = Store(config.collection, config.state_dir)
    serve_now = store.is_complete()
    parent = os.getpid()
    pid = os.fork()
    if pid == 0:  # the child leaves through os._exit, whatever happens
        code = 1
        try:
            _die_with(parent)
            result = Writer(store).refresh(progress=True)
            if serve_now:  # the moment answers are current again is worth a line
                log.info("the index %s is up to date with the collection: %s", store.path, result)
            code = 0
        except BaseException as exc:
            if serve_now:  # else the serving process walks again, and reports what goes wrong
                log.error(
                    "cannot bring the index %s up to date at start (%s); answering from "
                    "it as it is: the indexer tries again once it runs",
                    store.path,
                    exc,
                )
        finally:
            logging.shutdown()
            os._exit(code)
    _early[str(store.path)] = (pid, serve_now)


def _die_with(parent: int) -> None:
    """Have the kernel stop this process when `parent` ends (Linux), so stopping `serve` never
    leaves a walk running on its own."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        return
    if os.getppid() != parent:  # it ended before the request was made
        os._exit(1)


def _early_refresh_done(path: str) -> bool:
    """Whether a process forked by refresh_early brought `path` up to date, or brings it up
    to date while serving (then it is not waited for)."""
    pid, serve_now = _early.pop(path, (None, False))
    if pid is None:
        return False
    if serve_now:
        log.info(
            "answering from the index %s as it was left; process %d brings it up to date "
            "with the collection meanwhile",
            path,
            pid,
        )
        _unwaited.add(pid)
        return True
    try:
        _, status = os.waitpid(pid, 0)
    except ChildProcessError:
        return False
    return os.waitstatus_to_exitcode(status) == 0


def reap_early() -> None:
    """Collect the early walks that ended while nothing waited for them (gunicorn's SIGCHLD
    handler, once installed, collects the later ones): no process stays a zombie."""
    for pid in list(_unwaited):
        try:
            ended, _ = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            ended = pid
        if ended:
            _unwaited.discard(pid)


class LiveIndex:
    """The index one app serves from: brought up to date when the app is made, then kept
    current by the collection's indexer once `follow()` is called after forking."""

    def __init__(self, config: settings.Config):
        self.config = config
        self.store = Store(config.collection, usable_state_dir(config.state_dir))
        self.catalog = StoreCatalog(self.store)
        self.follower = Follower(self.store, config)

    def refresh(self, shown: Callable[[int, int | None], object] | None = None):
        """Re-read what changed (everything, the first time), logging progress if long, or
        showing it to `shown` (`index` on a terminal: common/progress.py `Bar`).

        An index that cannot be written (a full or failing disk) is served as it is; if
        there is none yet, it is built in a private temporary directory instead."""
        if _early_refresh_done(str(self.store.path)):
            return None
        try:
            return Writer(self.store).refresh(progress=shown or True)
        except (sqlite3.Error, OSError) as exc:
            if not os.path.isdir(self.store.root):
                raise  # the collection itself is missing: nothing to serve
            if self.store.is_complete():
                log.error(
                    "cannot bring the index %s up to date (%s); answering from it as it "
                    "is until the indexer can write it",
                    self.store.path,
                    exc,
                )
                return None
            fallback = private_state_dir()
            if os.path.abspath(fallback) != str(self.store.state_dir):
                log.error(
                    "cannot write the index in %s (%s); building it in %s instead",
                    self.store.state_dir,
                    exc,
                    fallback,
                )
                self.store = Store(self.config.collection, fallback)
                self.catalog = StoreCatalog(self.store)
                self.follower = Follower(self.store, self.config)
                try:
                    return Writer(self.store).refresh(progress=shown or True)
                except (sqlite3.Error, OSError) as again:
                    exc = again
            # Nowhere to keep an index: this process alone holds one in memory, as read now.
            log.error(
                "cannot write the index anywhere (%s); this process reads the collection "
                "into memory and will not see later changes",
                exc,
            )
            self.catalog = MemoryCatalog(items.scan(self.config.collection))
            self.follower = None
            return None

    def follow(self, wanted: Callable[[], bool] = lambda: True) -> None:
        if self.config.index_watch != "off" and self.follower is not None:
            self.follower.start(wanted)

    def close(self) -> None:
        if self.follower is not None:
            self.follower.stop()
        self.catalog.close()


class MemoryCatalog:
    """`items.scan`'s catalog with the store catalog's request hooks (the last resort)."""

    def __init__(self, catalog: items.Catalog):
        self._catalog = catalog
        self.root = catalog.root

    def __getattr__(self, name: str):
        return getattr(self._catalog, name)

    def begin(self) -> None:
        pass

    def end(self) -> None:
        pass

    def close(self) -> None:
        pass

    def count(self) -> int:
        return len(self._catalog.by_directory)

    def kinds(self) -> dict[tuple[str, str], int]:
        return dict(Counter((i.state, i.contenttype) for i in self._catalog.by_directory.values()))

    def page(self, **_) -> None:
        return None  # no index: the item list says it is unavailable
