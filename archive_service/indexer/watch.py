"""Following the collection while the service runs: one indexer process per collection.

Serving processes never watch. Each one runs a small `Follower` thread (follower.py, started after
gunicorn forks) that makes sure one indexer process runs: the first to take the store's watch
lock starts `archive-service index --watch` and hands it the lock, so exactly one process
writes however many workers there are, and a dead indexer is replaced within a second. The
indexer exits when the process that started it does (it holds the read end of a pipe whose
write end only that process has). Keeping the watches (one per directory) and the parsing in
their own process keeps the workers' memory flat at any collection size.

The indexer (`Indexer`) turns inotify events into scopes (the item, or the part of the tree,
an event can affect), lets watchdog's EventDebouncer coalesce bursts, and refreshes the
scopes in waves: an rsync of 10,000 items is a few waves, each one walk and one batch of
transactions. On Linux the watches are our own thin layer (inotify.py: set from the index, a
few bytes each); elsewhere watchdog's observer watches. Where watching is impossible (a
network file system, too few inotify watches) it rescans every `rescan_interval` seconds
instead and says why, once. While watching it still rescans everything every
`consistency_interval` seconds, and counts its watches against the directories a walk found.
After an inotify queue overflow (the kernel drops events then) our own layer refreshes only
what changed since its events were last whole (index/changed.py: ctimes, not a read of the
tree; the directories made meanwhile are watched then); watchdog's rescans everything.
"""

from __future__ import annotations

import importlib.util
import logging
import os
import signal
import sqlite3
import sys
import threading
import time
import warnings
from collections.abc import Iterable

from .. import settings
from ..index.store import Store, Writer
from ..index.walk import cover, scope_of
from ..protocol.catalog import directory_of
from . import repair
from .environment import file_system_type, inotify_watches, max_user_watches
from .follower import FOLLOW_SECONDS
from .vouch import VOUCH_EVERY, Tally, Voucher

log = logging.getLogger(__name__)

DEBOUNCE_SECONDS = 0.2  # events within this of each other make one wave (and the delay added)
RETRY_SECONDS = 10.0  # after an index write failed, a full rescan this much later
OVERFLOW = "the inotify queue overflowed"
# File systems whose changes, made elsewhere, inotify never hears of.
NETWORK_FILE_SYSTEMS = set(
    (
        "nfs nfs4 cifs smb3 smbfs ncpfs afs 9p ceph glusterfs lustre gpfs beegfs ocfs2 gfs2 "
        "virtiofs vboxsf fuse.sshfs fuse.glusterfs fuse.s3fs fuse.rclone fuse.davfs2 davfs "
        "fuse.cephfs fuse.gcsfuse"
    ).split()
)


# -------------------------------------------------------------------------- the indexer


def _real_changes() -> list:
    from watchdog.events import (
        DirCreatedEvent,
        DirDeletedEvent,
        DirMovedEvent,
        FileAttribEvent,
        FileClosedEvent,
        FileCreatedEvent,
        FileDeletedEvent,
        FileModifiedEvent,
        FileMovedEvent,
    )

    # Not opened / closed_no_write (our own reads), nor the parent-directory "modified"
    # echoes of every change. Attrib: `touch` moves a file's time, and times are timestamps.
    # Closed (after writing): a copy's last word on a file whose writes we may have missed.
    return [
        FileCreatedEvent,
        DirCreatedEvent,
        FileModifiedEvent,
        FileAttribEvent,
        FileDeletedEvent,
        DirDeletedEvent,
        FileMovedEvent,
        DirMovedEvent,
        FileClosedEvent,
    ]


def _thin_inotify() -> bool:
    """Our own inotify layer can watch here (Linux, with its binding installed)."""
    return (
        sys.platform.startswith("linux") and importlib.util.find_spec("inotify_simple") is not None
    )


class _OverflowAlarm(logging.Handler):
    """watchdog reports an inotify queue overflow only in its log; hear it there."""

    def __init__(self, indexer: Indexer):
        super().__init__(logging.WARNING)
        self.indexer = indexer

    def emit(self, record: logging.LogRecord) -> None:
        if str(record.msg).startswith("Inotify queue overflowed"):
            self.indexer.request_rescan(OVERFLOW)


class Indexer:
    """Keeps one store equal to its collection until `stop` is set: watching, or polling."""

    def __init__(
        self,
        store: Store,
        *,
        mode: str = "auto",
        rescan_interval: float = 60,
        consistency_interval: float = 3600,
        stop: threading.Event | None = None,
    ):
        self.store = store
        self.writer = Writer(store, log_problems=True)
        self.mode = mode
        self.rescan_interval = rescan_interval
        self.consistency_interval = consistency_interval
        self.stop = stop or threading.Event()
        self.waves = 0
        self._cond = threading.Condition()
        self._pending: set[str] = set()
        self._rescan_reason: str | None = None
        self._overflow_since: int | None = None  # ns: events were whole before it
        self._observer = None
        self._debouncer = None
        self._alarm = _OverflowAlarm(self)
        self._root_id: tuple[int, int] | None = None
        self._said: set[str] = set()
        self._inotify_fd: int | None = None
        self._watches = None  # our own inotify layer (Linux), instead of the observer
        self._pump: threading.Thread | None = None
        self._limit: str | None = None  # the watch limit, reached while watching
        self._rows_watched = 0  # the index's rows up to this rowid had their watches set
        self._retry = False
        self._retry_at: float | None = None
        self._state: str | None = None
        self._verified_at: float | None = None  # when a refresh last checked the index file
        self._kept = False  # a refresh of ours ended: the index file is there to keep
        self.real_root = store.real_root
        self._tally = Tally(Voucher(store))  # what workers may trust (vouch.py)

    # -- events ------------------------------------------------------------------------

    def _scope(self, path: str | bytes, is_directory: bool) -> str | None:
        path = os.fsdecode(path)
        if path == self.real_root:
            return ""
        if not path.startswith(self.real_root + os.sep):
            return None
        return scope_of(path[len(self.real_root) + 1 :].split(os.sep), is_directory)

    def _take(self, events: list) -> None:
        """EventDebouncer's callback, run under its lock: only hand the scopes over."""
        scopes = set()
        for event in events:
            for path in (event.src_path, getattr(event, "dest_path", "")):
                if path:
                    scope = self._scope(path, event.is_directory)
                    if scope is not None:
                        scopes.add(scope)
        if scopes:
            with self._cond:
                self._pending |= scopes
                self._cond.notify()

    def _take_paths(self, events: list) -> None:
        """EventDebouncer's callback for our own layer's (path, is_directory) events."""
        scopes = {s for path, is_dir in events if (s := self._scope(path, is_dir)) is not None}
        if scopes:
            with self._cond:
                self._pending |= scopes
                self._cond.notify()
        self._tally.handed(len(events))

    def request_rescan(self, reason: str, since: int | None = None) -> None:
        with self._cond:
            self._rescan_reason = self._rescan_reason or reason
            if since is not None:
                self._overflow_since = min(since, self._overflow_since or since)
            self._cond.notify()

    # -- watching ----------------------------------------------------------------------

    def _say_once(self, reason: str) -> None:
        if reason not in self._said:
            self._said.add(reason)
            log.warning(
                "not watching %s: %s; rescanning it every %s s instead",
                self.store.root,
                reason,
                f"{self.rescan_interval:g}",
            )

    def _why_not_watch(self) -> str | None:
        if self.mode == "poll":
            return "index_watch is poll"
        kind = file_system_type(self.real_root)
        if kind in NETWORK_FILE_SYSTEMS:
            return (
                f"it is on a {kind} file system, whose changes made elsewhere inotify never reports"
            )
        dirs = int(self.store.meta().get("dirs", "0"))
        limit = max_user_watches()
        if limit is not None and dirs >= limit:
            return (
                f"it has {dirs} directories and fs.inotify.max_user_watches is {limit} "
                f"(raise it: sysctl fs.inotify.max_user_watches={2 * dirs}, or install "
                "contrib/sysctl/60-archive-service.conf)"
            )
        return None

    def _start_watching(self) -> bool:
        from watchdog.events import FileSystemEventHandler
        from watchdog.observers import Observer
        from watchdog.utils.event_debouncer import EventDebouncer

        reason = self._why_not_watch()
        if reason is None and _thin_inotify():
            reason = self._start_inotify()
        elif reason is None:
            # A copied tree reaches watchdog twice (the kernel's events and its own walk of
            # the new directory), and it warns, harmlessly, each time it re-adds a watch.
            warnings.filterwarnings(
                "ignore",
                r"Callback with id '\d+' (already exists|does "
                r"not exist) for watch",
                RuntimeWarning,
                r"watchdog\.",
            )
            before = inotify_watches()
            debouncer = EventDebouncer(DEBOUNCE_SECONDS, self._take)
            handler = FileSystemEventHandler()
            handler.on_any_event = debouncer.handle_event
            observer = None
            try:
                observer = Observer()
                observer.schedule(
                    handler, self.real_root, recursive=True, event_filter=_real_changes()
                )
                debouncer.start()
                observer.start()
            except OSError as exc:
                # Perhaps passing (the directory is being replaced): try again at each rescan.
                reason = f"inotify failed ({exc.strerror or exc})"
                self._stop_observer(observer, debouncer)
                self._retry = True
            else:
                self._observer, self._debouncer = observer, debouncer
                logging.getLogger("watchdog.observers.inotify_c").addHandler(self._alarm)
                # Ours is the one inotify descriptor that starting the observer added.
                new = [fd for fd in inotify_watches() if fd not in before]
                self._inotify_fd = new[0] if len(new) == 1 else None
        if reason is not None:
            self._say_once(reason)
            return False
        self._retry = False
        self._root_id = self._identity()
        log.info("watching %s for changes", self.store.root)
        return True

    # -- our own inotify layer (Linux) --------------------------------------------------------

    def _limit_reached(self, watches) -> str:
        return (
            f"fs.inotify.max_user_watches ({max_user_watches()}, shared by every program of "
            f"this user) was reached after {watches.count} watches (raise it, or install "
            "contrib/sysctl/60-archive-service.conf)"
        )

    def _start_inotify(self) -> str | None:
        """Watch the directories the index knows, hear new ones as they come; or why not."""
        from watchdog.utils.event_debouncer import EventDebouncer

        from .inotify import Watches, WatchLimit

        try:
            watches = Watches(self.real_root)
        except (OSError, WatchLimit) as exc:
            self._retry = True  # perhaps passing (the directory is being replaced)
            return f"inotify failed ({getattr(exc, 'strerror', None) or exc})"
        debouncer = EventDebouncer(DEBOUNCE_SECONDS, self._take_paths)
        self._watches, self._debouncer = watches, debouncer
        self._limit = None
        debouncer.start()
        # Reading starts before the watches are set: a burst meanwhile must not overflow.
        self._pump = threading.Thread(
            target=self._read_events, args=(watches, debouncer), name="inotify", daemon=True
        )
        self._pump.start()
        try:
            self._rows_watched = self._last_row()
            watches.from_index(self._indexed_directories())
        except WatchLimit:
            reason = self._limit_reached(watches)
            self._stop_watching()
            return reason
        except (sqlite3.Error, OSError) as exc:
            # No index to read (yet): the directories are watched as the walk after finds them.
            log.warning("could not read the item directories of %s: %s", self.store.path, exc)
            watches.rewatch()
        return None

    def _last_row(self) -> int:
        conn = self.store.connect(readonly=True)
        try:
            return conn.execute("SELECT coalesce(max(rowid), 0) FROM items").fetchone()[0]
        finally:
            conn.close()

    def _indexed_directories(self, after: int = 0) -> Iterable[str]:
        conn = self.store.connect(readonly=True)
        try:
            # Key order keeps each host/word/year's items together (one watch per level).
            rows = conn.execute(
                "SELECT sortkey FROM items WHERE rowid > ? ORDER BY sortkey", (after,)
            )
            for (key,) in rows:
                yield directory_of(key)
        finally:
            conn.close()

    def _watch_new_rows(self) -> None:
        """Watch the items a full walk found that the index did not hold when the watches
        were set (made before their parent was watched, or while an overflow dropped events:
        no event told of them), then look at the directories newly watched once more (what
        changed in them before their watch)."""
        mark = self._last_row()
        if mark <= self._rows_watched:
            return
        unheard = self._watches.from_index(self._indexed_directories(self._rows_watched))
        self._rows_watched = mark
        if unheard:
            with self._cond:
                self._pending.update(unheard if len(unheard) <= 10_000 else [""])
                self._cond.notify()

    def _read_events(self, watches, debouncer) -> None:
        """The reading thread: paths to the debouncer; an overflow, a lost root or the watch
        limit to the loop. One bad event never stops it."""
        from .inotify import WatchLimit

        # Each read drains the queue: what an overflow dropped came after the read before.
        began = previous = time.time_ns()
        while self._watches is watches:
            previous, began = began, time.time_ns()
            read_from = time.monotonic()
            try:
                changed, overflow, lost_root = watches.read(200)
            except WatchLimit:
                self._limit = self._limit_reached(watches)
                self.request_rescan("the inotify watch limit was reached")
                return
            except (OSError, ValueError):
                if self._watches is not watches:
                    return  # closed: we stopped watching
                log.exception("reading inotify events of %s", self.store.root)
                time.sleep(0.2)
                continue
            except Exception:  # noqa: BLE001 - anything else: say so and read on
                log.exception("handling inotify events of %s", self.store.root)
                continue
            self._tally.heard(len(changed) + overflow + lost_root, read_from)
            if overflow:
                self.request_rescan(OVERFLOW, previous)
            if lost_root:
                self.request_rescan("the watch on the collection stopped")
            self._tally.handed(overflow + lost_root)
            for event in changed:
                debouncer.handle_event(event)

    def _grow_watches(self, how) -> None:
        from .inotify import WatchLimit

        try:
            how()
        except WatchLimit:
            self._limit = self._limit_reached(self._watches)

    def _check_watches(self, dirs: int) -> str | None:
        """watchdog skips subdirectories it cannot watch without a word: count its watches
        against the directories a walk just counted (a few may come and go meanwhile)."""
        if self._watches is not None:
            # Ours says so when a watch is refused. Subdirectories of doc/ are not in the
            # index: listed once, if the walk counted more directories than are watched
            # (directories that hold no item count too, so this is only a hint).
            watches = self._watches
            if not watches.docs_listed and watches.count + 16 + dirs // 1000 < dirs:
                watches.below_docs()
            return None
        if self._inotify_fd is None:
            return None  # not Linux, or not ours alone to count
        watches = inotify_watches().get(self._inotify_fd)
        if watches is not None and watches + 16 + dirs // 1000 < dirs:
            return (
                f"only {watches} of its {dirs} directories could be watched "
                f"(fs.inotify.max_user_watches is {max_user_watches()}, shared by every "
                "program of this user)"
            )
        return None

    @staticmethod
    def _stop_observer(observer, debouncer) -> None:
        for thread in (observer, debouncer):
            if thread is None:
                continue
            try:
                thread.stop()
                if thread.is_alive():
                    thread.join(timeout=5)
            except (OSError, RuntimeError):
                pass

    def _stop_watching(self) -> None:
        logging.getLogger("watchdog.observers.inotify_c").removeHandler(self._alarm)
        watches, pump = self._watches, self._pump
        self._watches = self._pump = None  # tells the reading thread to end
        if pump is not None and pump is not threading.current_thread():
            pump.join(timeout=5)
        if watches is not None:
            watches.close()
        self._stop_observer(self._observer, self._debouncer)
        self._observer = self._debouncer = None

    def _identity(self) -> tuple[int, int] | None:
        try:
            st = os.stat(self.real_root)
        except OSError:
            return None
        return st.st_dev, st.st_ino

    def _watching_well(self) -> bool:
        """The observer runs and still watches the directory now at the collection's path."""
        if self._watches is not None:
            return (
                self._pump is not None
                and self._pump.is_alive()
                and self._watches.path(self._watches.root_wd) is not None
                and self._identity() == self._root_id
            )
        observer = self._observer
        return (
            observer is not None
            and observer.is_alive()
            and all(e.is_alive() for e in observer.emitters)
            and self._identity() == self._root_id
        )

    # -- the loop ----------------------------------------------------------------------

    def _refresh(self, scopes: Iterable[str] | None, why: str):
        # The index file is checked at the first full walk, then once per consistency
        # interval (a poll's rescan every minute would read the whole file each time: 0.7 s
        # at 1,000,000 items when cached, 12 s when not); a worker's report is taken at once.
        verify = scopes is None and (
            self._verified_at is None
            or self.store.reported_damage()
            or time.monotonic() - self._verified_at >= (self.consistency_interval or float("inf"))
        )
        try:
            lost = self._lost(scopes)
            if lost is not None:
                # Built beside the path and swapped in: readers keep what they read until then.
                result = self.writer.rebuild(lost, progress=True)
            else:
                result = self.writer.refresh(scopes, progress=scopes is None, verify=bool(verify))
        except (sqlite3.Error, OSError) as exc:
            # The collection gone, or the index unwritable (a full disk): keep the index as it
            # is, say so once, and try everything again a little later.
            message = f"cannot update the index of {self.store.root}: {exc}"
            if message not in self._said:
                self._said.add(message)
                log.error("%s; keeping it as it is and trying again", message)
            self._retry_at = time.monotonic() + RETRY_SECONDS
            return None
        self._retry_at = None
        self._kept = True
        if verify:
            self._verified_at = time.monotonic()
        self.waves += 1
        if result.read or result.removed or scopes is None:
            log.info("%s: %s", why, result)
        return result

    def _lost(self, scopes: Iterable[str] | None) -> str | None:
        """Why the index this indexer kept is gone from under it (its file removed or emptied
        while serving: a cleanup of the state directory, `: >` on it), or None. A partial
        refresh of what is left would make an index of that part alone, served as whole."""
        if not self._kept:
            return None
        if not self.store.exists():
            return "its file was removed"
        if scopes is not None and not self.store.is_complete():
            return "it no longer holds the whole collection"
        return None

    def _rescan(self, why: str, watching: bool) -> bool:
        """A full refresh; then whether we (still, or again) watch."""
        if not watching and self._retry and self.mode == "auto":
            watching = self._start_watching()
        if watching and self._watches is not None and self._watches.sparse():
            self._stop_watching()  # descriptors are numbered afresh in a new instance
            watching = self._start_watching()
        # After an overflow, the directories made while events were dropped are among those
        # the walk finds new, watched (and looked at once more) by _watch_new_rows.
        result = self._refresh(None, why)
        if watching and result is not None and self._watches is not None:
            self._grow_watches(self._watch_new_rows)
            self._grow_watches(lambda: self._check_watches(result.dirs))
        if watching and self._limit is not None:
            self._say_once(self._limit)
            self._stop_watching()
            watching = False
        if watching and result is not None and (reason := self._check_watches(result.dirs)):
            self._say_once(reason)
            self._stop_watching()
            watching = False
        self._set_state("watching" if watching else "polling")
        return watching

    def _set_state(self, state: str) -> None:
        """Say in the index who keeps it and how (for `index` and for whoever checks).
        Written when it changes only: any write makes every worker drop what it kept."""
        if state == self._state:
            return
        try:
            with self.store.write_lock():
                conn = self.store.connect()
                try:
                    conn.execute(
                        "INSERT OR REPLACE INTO meta VALUES ('indexer', ?)",
                        (f"{os.getpid()} {state} {time.time():.0f}",),
                    )
                finally:
                    conn.close()
            self._state = state  # remembered once written: a failed write is tried again
        except (sqlite3.Error, OSError):
            pass  # only a note for people; _refresh reports why the index cannot be written

    def run(self) -> None:
        """Index until `stop` is set (the caller holds the watch lock)."""
        try:
            if not self.store.is_complete():
                self._refresh(None, "first build")
            watching = self.mode != "off" and self._start_watching()
            # Whatever changed before the observer started is found by a walk after it.
            watching = self._rescan("consistency rescan at start", watching)
            next_full = self._next_full(watching)
            while not self.stop.is_set():
                taking = self._tally.taking()  # before taking: it errs on the side of less
                with self._cond:
                    turn = VOUCH_EVERY if self._watches is not None else 1.0
                    wait = min(turn, max(0.0, next_full - time.monotonic()))
                    self._cond.wait_for(
                        lambda: self._pending or self._rescan_reason or self.stop.is_set(), wait
                    )
                    scopes, self._pending = self._pending, set()
                    why, self._rescan_reason = self._rescan_reason, None
                    since, self._overflow_since = self._overflow_since, None
                if self.stop.is_set():
                    break
                if watching and not self._watching_well():
                    log.warning(
                        "the watch on %s stopped (the directory was moved, removed or "
                        "remounted); watching it again",
                        self.store.root,
                    )
                    self._stop_watching()
                    watching = self._start_watching()
                    why, since = why or "the watch was restarted", None
                if why is None and time.monotonic() >= next_full:
                    why = "consistency rescan" if watching else "periodic rescan"
                if why is None and self._retry_at and time.monotonic() >= self._retry_at:
                    why = "a rescan after an error"
                # After a failed write (a full disk), a rebuild waits for the retry above:
                # tried every second, it logged its ERROR every second and walked as often.
                if why is None and self._retry_at is None:
                    if self.store.reported_damage() is not None:
                        why = "a rebuild of the damaged index"  # a worker met it (Store.damage)
                    elif self._kept and not self.store.exists():
                        why = "a rebuild of the removed index"  # one stat a second
                if why == OVERFLOW and since is not None and repair.may_repair(self, watching):
                    taking = self._tally.walking()  # the repair covers all heard until now
                    repair.repair(self, since, scopes)
                elif why is not None:
                    taking = self._tally.walking()
                    watching = self._rescan(why, watching)
                    next_full = self._next_full(watching)
                elif scopes:
                    self._refresh(scopes, f"{len(cover(scopes))} changed place(s)")
                ok = self._retry_at is None  # else the refresh failed: nothing committed
                inotify = ok and watching and self._watches is not None
                self._tally.done(taking if ok else 0, inotify and self._watching_well())
        finally:
            self._tally.voucher.withdraw()
            self._stop_watching()
            self._set_state("stopped")

    def _next_full(self, watching: bool) -> float:
        interval = self.consistency_interval if watching else self.rescan_interval
        return time.monotonic() + interval if interval else float("inf")


def run_indexer(
    store: Store,
    config: settings.Config,
    *,
    lock_fd: int | None = None,
    owner_fd: int | None = None,
) -> int:
    """`archive-service index --watch`: be this collection's indexer until told to stop."""
    stop = threading.Event()

    def on_signal(signum, frame):
        stop.set()
        raise SystemExit(0)  # leave a refresh at once: its open transaction is rolled back

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    if owner_fd is not None:

        def watch_owner() -> None:
            while True:
                try:
                    if not os.read(owner_fd, 4096):
                        break
                except InterruptedError:
                    continue
                except OSError:
                    break
            log.info(
                "the serving process that started the indexer of %s stopped; stopping too",
                store.root,
            )
            os.kill(os.getpid(), signal.SIGTERM)

        threading.Thread(target=watch_owner, name="owner", daemon=True).start()
    if lock_fd is None:
        lock_fd = store.try_watch_lock()
        if lock_fd is None:
            log.info("another indexer keeps %s current; standing by", store.root)
            while lock_fd is None:
                time.sleep(FOLLOW_SECONDS)
                lock_fd = store.try_watch_lock()
    try:
        Indexer(
            store,
            mode=config.index_watch if config.index_watch != "off" else "poll",
            rescan_interval=config.rescan_interval,
            consistency_interval=config.consistency_interval,
            stop=stop,
        ).run()
    except KeyboardInterrupt:
        pass
    finally:
        os.close(lock_fd)
    return 0
