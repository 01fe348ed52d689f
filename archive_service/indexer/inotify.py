"""The indexer's inotify watches, kept lean (issue 22): one inotify instance (inotify_simple, a
thin ctypes binding) and, per watched directory, only its parent's watch descriptor and its
name, in flat arrays indexed by descriptor (about 13 bytes and the name's own bytes); a path is
rebuilt from them when an event names a watch. watchdog's observer kept two dictionaries of
full paths per directory: 1.4 GB at 1,000,000 items (bench/RESULTS.md).

The watches come from the index (`from_index`: its item directories, their levels and doc/),
not from a walk. A directory that appears (created, or a whole subtree moved in) is watched,
then listed, then each subdirectory so (`watch_tree`): whatever was made in it before its watch
was set is found by that listing and by the refresh of its scope that follows, whatever after
is heard. A watched directory renamed keeps its watch (inotify follows the inode); the rename
points it at its new parent and name, and its subtree follows. One moved out of the
collection is forgotten (`MOVE_SELF`: its path no longer leads to it).
"""

from __future__ import annotations

import errno
import os
import threading
from array import array
from collections.abc import Iterable, Iterator

from inotify_simple import INotify
from inotify_simple import flags as F

# Changes only: no access, open or close-without-write (our own reads would echo).
MASK = (
    F.MODIFY
    | F.ATTRIB
    | F.CLOSE_WRITE
    | F.MOVED_FROM
    | F.MOVED_TO
    | F.CREATE
    | F.DELETE
    | F.DELETE_SELF
    | F.MOVE_SELF
    | F.ONLYDIR
    | F.DONT_FOLLOW
)
_NEW_DIR = F.CREATE | F.MOVED_TO

# The parent of a descriptor: another descriptor, or one of these.
_FREE = 0  # not a watch of ours (descriptors start at 1)
_GONE = -1  # moved out of the collection: its events (and its subtree's) are not ours
_TOP = -2  # the collection's root
_MAX_DEPTH = 4096
_DOC = b"doc"


class WatchLimit(Exception):
    """The kernel refused a watch: fs.inotify.max_user_watches is reached."""


class Watches:
    """The watches on one collection; safe to use from the reading thread and another."""

    def __init__(self, root: str):
        self.root = os.fsencode(root)
        self.inotify = INotify(nonblocking=True)
        self._lock = threading.RLock()
        self._parent = array("i")
        self._start = array("Q")
        self._len = array("B")
        self._names = bytearray()
        self._garbage = 0
        self.count = 0
        self.failed = 0  # directories that could not be watched (gone, unreadable)
        self.docs_listed = False
        self.root_wd, _ = self._watch(self.root, _TOP, b"")
        if self.root_wd is None:
            self.close()
            raise FileNotFoundError(errno.ENOENT, "cannot watch the collection", root)

    def close(self) -> None:
        self.inotify.close()

    def fileno(self) -> int:
        return self.inotify.fileno()

    # -- the table ----------------------------------------------------------------------

    def _name(self, wd: int) -> bytes:
        start = self._start[wd]
        return bytes(self._names[start : start + self._len[wd]])

    def _set(self, wd: int, parent: int, name: bytes) -> bool:
        """Record `wd` at (parent, name); True when it was not a live watch of ours."""
        if wd >= len(self._parent):
            grow = wd + 1 - len(self._parent)
            self._parent.extend(array("i", bytes(4 * grow)))
            self._start.extend(array("Q", bytes(8 * grow)))
            self._len.extend(array("B", bytes(grow)))
        was = self._parent[wd]
        if was > 0 or was == _TOP:
            if self._name(wd) != name:
                self._garbage += self._len[wd]
                self._store_name(wd, name)
        else:
            self.count += 1
            self._store_name(wd, name)
        self._parent[wd] = parent
        return not (was > 0 or was == _TOP)

    def _store_name(self, wd: int, name: bytes) -> None:
        self._start[wd] = len(self._names)
        self._len[wd] = len(name)
        self._names += name

    def _forget(self, wd: int) -> None:
        if 0 < wd < len(self._parent) and self._parent[wd] != _FREE:
            if self._parent[wd] != _GONE:
                self.count -= 1
            self._parent[wd] = _FREE
            self._garbage += self._len[wd]
            self._len[wd] = 0
            if self._garbage > (1 << 20) and self._garbage * 2 > len(self._names):
                self._compact()

    def _compact(self) -> None:
        names = bytearray()
        for wd, parent in enumerate(self._parent):
            if parent != _FREE:
                start = self._start[wd]
                chunk = self._names[start : start + self._len[wd]]
                self._start[wd] = len(names)
                names += chunk
        self._names, self._garbage = names, 0

    def sparse(self) -> bool:
        """Most descriptors numbered so far are gone (the kernel never reuses one until it
        wraps): the arrays would be smaller made anew."""
        return len(self._parent) > 1_000_000 and len(self._parent) > 4 * self.count

    def path(self, wd: int) -> bytes | None:
        """The path of a watched directory, or None when it is no longer ours."""
        parts = []
        parents = self._parent
        for _ in range(_MAX_DEPTH):
            if wd <= 0 or wd >= len(parents):
                return None
            parent = parents[wd]
            if parent == _TOP:
                return b"/".join([self.root, *reversed(parts)])
            if parent <= 0:
                return None
            parts.append(self._name(wd))
            wd = parent
        return None

    # -- adding watches ------------------------------------------------------------------

    def _watch(self, path: bytes, parent: int, name: bytes) -> tuple[int | None, bool]:
        """Watch `path` (the directory `name` of `parent`): its descriptor, and whether it
        was not a live watch of ours before."""
        try:
            wd = self.inotify.add_watch(path, MASK)
        except OSError as exc:
            if exc.errno == errno.ENOSPC:
                raise WatchLimit(str(exc)) from exc
            self.failed += exc.errno not in (errno.ENOENT, errno.ENOTDIR)
            return None, False  # gone meanwhile, not a directory, or unreadable
        with self._lock:
            return wd, self._set(wd, parent, name)

    def add(self, parent: int, name: bytes) -> tuple[int | None, bool]:
        base = self.path(parent)
        return (None, False) if base is None else self._watch(base + b"/" + name, parent, name)

    def watch_tree(self, parent: int, name: bytes, *, again: bool = False) -> int | None:
        """Watch the directory `name` of `parent`, then list it and do the same for each of
        its subdirectories (a link to a directory is not followed). A directory that was a
        live watch of ours already (renamed within the collection) keeps its subtree's
        watches as they are, unless `again`."""
        base = self.path(parent)
        if base is None:
            return None
        path = base + b"/" + name
        wd, new = self._watch(path, parent, name)
        if wd is not None and (new or again):
            self._watch_below(wd, path, again)
        return wd

    def _watch_below(self, top: int, top_path: bytes, again: bool) -> None:
        stack = [(top, top_path)]
        while stack:
            wd, path = stack.pop()
            try:
                with os.scandir(path) as entries:
                    names = [e.name for e in entries if e.is_dir(follow_symlinks=False)]
            except OSError:
                continue
            for name in names:
                child_path = path + b"/" + name
                child, new = self._watch(child_path, wd, name)
                if child is not None and (new or again):
                    stack.append((child, child_path))

    def from_index(self, directories: Iterable[str]) -> list[str]:
        """Watch the item directories the index holds (in key order), the levels above them
        and their doc/, without walking the tree. Returns the topmost of those that were not
        watched already (what may have changed in them unheard)."""
        levels: list[tuple[bytes, int | None, bool]] = []  # the current host/word/year
        tops: list[str] = []

        def watch(parent: int, name: bytes, where: list[bytes], parent_new: bool):
            wd, new = self.add(parent, name)
            if new and not parent_new:
                tops.append(os.fsdecode(b"/".join([*where, name])))
            return wd, new

        for directory in directories:
            parts = os.fsencode(directory).split(b"/")
            *above, last = parts
            keep = 0
            while keep < len(levels) and keep < len(above) and levels[keep][0] == above[keep]:
                keep += 1
            del levels[keep:]
            for i, segment in enumerate(above[keep:], keep):
                parent, parent_new = (
                    (levels[-1][1], levels[-1][2]) if levels else (self.root_wd, False)
                )
                wd, new = (
                    (None, False)
                    if parent is None
                    else watch(parent, segment, above[:i], parent_new)
                )
                levels.append((segment, wd, new))
            parent, parent_new = (levels[-1][1], levels[-1][2]) if levels else (self.root_wd, False)
            if parent is None:
                continue
            item, new = watch(parent, last, above, parent_new)
            if item is not None:
                watch(item, _DOC, parts, new)
        return tops

    def below_docs(self) -> None:
        """Watch what lies below each watched doc/ (the index does not keep its
        subdirectories): only when a walk counted more directories than are watched."""
        self.docs_listed = True
        for wd in range(len(self._parent)):
            if self._parent[wd] > 0 and self._len[wd] == 3 and self._name(wd) == _DOC:
                path = self.path(wd)
                if path is not None:
                    self._watch_below(wd, path, False)

    def rewatch(self) -> None:
        """Watch every directory of the tree again (after an overflow lost the events of
        some that appeared meanwhile)."""
        self._watch_below(self.root_wd, self.root, True)

    # -- events --------------------------------------------------------------------------

    def read(self, timeout_ms: int) -> tuple[list[tuple[bytes, bool]], bool, bool]:
        """Wait up to `timeout_ms` for events: (the paths they name, each with whether it is
        a directory), whether the queue overflowed, and whether the root is no longer
        watched."""
        changed: list[tuple[bytes, bool]] = []
        overflow = lost_root = False
        for event in self.inotify.read(timeout=timeout_ms):
            mask, wd = event.mask, event.wd
            if mask & F.Q_OVERFLOW:
                overflow = True
                continue
            if mask & F.IGNORED:
                with self._lock:
                    self._forget(wd)
                lost_root = lost_root or wd == self.root_wd
                continue
            if mask & F.MOVE_SELF:
                lost_root = self._moved(wd) or lost_root
                continue
            if mask & F.DELETE_SELF:
                continue  # IN_IGNORED follows; the parent's IN_DELETE names it
            base = self.path(wd)
            if base is None:
                continue
            name = os.fsencode(event.name)
            is_dir = bool(mask & F.ISDIR)
            if is_dir and mask & _NEW_DIR:
                self.watch_tree(wd, name)
            changed.append((base + b"/" + name if name else base, is_dir))
        return changed, overflow, lost_root

    def _moved(self, wd: int) -> bool:
        """A watched directory was renamed: if its recorded path no longer leads to it (it left
        the collection, or its new place was not heard of), it is not ours any more. True
        when that is the root."""
        path = self.path(wd)
        if path is None:
            return False
        try:
            now = self.inotify.add_watch(path, MASK)
        except OSError:
            now = None
        with self._lock:
            if now == wd:
                return False
            if now is not None:  # another directory sits there now
                self._set(now, self._parent[wd], self._name(wd))
            if self._parent[wd] > 0:
                self.count -= 1
            self._parent[wd] = _GONE
        return wd == self.root_wd

    def __iter__(self) -> Iterator[int]:
        return (wd for wd, parent in enumerate(self._parent) if parent > 0 or parent == _TOP)
