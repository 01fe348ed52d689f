"""What the indexer vouches for: every change made to the collection before a moment is in
the index (issue 35).

While it watches with inotify and has committed everything it heard, the indexer writes that
moment (CLOCK_MONOTONIC, shared by the processes of a machine) into `<index>.vouched`, a few
times a second. A worker maps the file and trusts the answers it kept from the index's current
generation while the moment is younger than `TRUST_FOR`: a file removed since is then either
in a newer generation (which drops every kept answer) or not yet committed, and then the
moment stops moving and the trust lapses within `TRUST_FOR`. Polling, behind (a wave or a
rescan in progress, a burst still being read), stopped or dead, the indexer vouches for
nothing and workers check a kept answer's files on disk again, as before.

The moment is 8 bytes written with one pwrite and read from a shared map: no system call on a
request's path."""

from __future__ import annotations

import mmap
import os
import struct
import threading
import time

from ..index.store import Store

# How long a worker trusts a moment it read. A change is heard within a read of the inotify
# queue (200 ms) and vouched for at the indexer's next turn (VOUCH_EVERY): a healthy indexer
# vouches for moments 0.2-0.5 s old. Below a second: "no URL for a file gone more than a
# second ago" holds whatever the indexer does.
TRUST_FOR = 0.9
VOUCH_EVERY = 0.1  # how often a watching, idle indexer says so
REOPEN_EVERY = 1.0  # a worker looks for a (new) file at most this often while it trusts none

_MOMENT = struct.Struct("<d")


def vouch_path(store: Store) -> str:
    return f"{store.path}.vouched"


class Voucher:
    """The indexer's side: `vouch(moment)` and `withdraw()`; failures are silent (workers then
    check the disk, as they do when nothing is vouched for)."""

    def __init__(self, store: Store):
        self.path = vouch_path(store)
        self._fd: int | None = None
        self._said: float | None = None  # written once at least: what a dead one left goes

    def vouch(self, moment: float | None) -> None:
        """Every change made before `moment` (time.monotonic()) is committed; None: no
        such moment (the indexer is behind, or not watching)."""
        value = 0.0 if moment is None else moment
        if value == self._said:
            return
        try:
            if self._fd is None:
                self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
            os.pwrite(self._fd, _MOMENT.pack(value), 0)
            self._said = value
        except OSError:
            self.close()

    def withdraw(self) -> None:
        self.vouch(None)

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


class Vouched:
    """A worker's side, callable: whether the index holds every change made to the collection
    until at most TRUST_FOR ago (protocol.answers.Archive's `current`)."""

    def __init__(self, store: Store):
        self.path = vouch_path(store)
        self._map: mmap.mmap | None = None
        self._looked = float("-inf")

    def __call__(self) -> bool:
        now = time.monotonic()
        if self._fresh(now):
            return True
        if now - self._looked >= REOPEN_EVERY:
            # No file yet, or another one: an index rebuilt beside, a state directory cleaned.
            self._looked = now
            self._map = self._open()
            return self._fresh(now)
        return False

    def _fresh(self, now: float) -> bool:
        return self._map is not None and 0 <= now - _MOMENT.unpack_from(self._map)[0] < TRUST_FOR

    def _open(self) -> mmap.mmap | None:
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            return None
        try:
            if os.fstat(fd).st_size < _MOMENT.size:
                return None
            return mmap.mmap(fd, _MOMENT.size, prot=mmap.PROT_READ)
        except (OSError, ValueError):
            return None
        finally:
            os.close(fd)


class Tally:
    """The indexer's count of what it heard and what it committed, and so what it can vouch
    for: the start of the inotify reader's last read that found nothing, once everything
    heard before it is committed. The reader counts what it passes on before passing it
    (`heard`), the callbacks after it is queued for the loop (`handed`), the loop what it
    took before taking it (`taking`): each count errs on the side of vouching later."""

    def __init__(self, voucher: Voucher):
        self.voucher = voucher
        self._lock = threading.Lock()
        self._heard = self._handed = self._done = 0
        self._idle_from: float | None = None

    def heard(self, count: int, read_from: float) -> None:
        """The reader's read that started at `read_from` found `count` things to pass on."""
        with self._lock:
            if count:
                self._heard += count
            else:
                self._idle_from = read_from

    def handed(self, count: int) -> None:
        with self._lock:
            self._handed += count

    def taking(self) -> int:
        with self._lock:
            return self._handed

    def walking(self) -> int:
        """A full walk starts: it covers whatever was heard until now."""
        with self._lock:
            return self._heard

    def done(self, taken: int, watching: bool) -> None:
        """The loop committed what was handed up to `taken`; `watching`: with inotify, well."""
        with self._lock:
            self._done = max(self._done, taken)
            caught_up = watching and self._done == self._heard
            moment = self._idle_from if caught_up else None
        self.voucher.vouch(moment)
