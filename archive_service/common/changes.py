"""A changes counter beside a database file: its writers bump it after each commit, its
readers map it into memory and read it with no system call (PRAGMA data_version takes the
WAL's locks, and gives the interpreter away to other threads while it does). The index
(index/store.py) and the resolver's registry (resolver/registry.py) keep one each."""

from __future__ import annotations

import mmap
import os


def bump(path: str) -> OSError | None:
    """After a commit: tell the readers the file changed; the error if that failed (the
    caller says so: its readers still see the commit when they next look at the file)."""
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            count = int.from_bytes(os.pread(fd, 8, 0).ljust(8, b"\0"), "little")
            os.pwrite(fd, ((count + 1) % 2**64).to_bytes(8, "little"), 0)
        finally:
            os.close(fd)
    except OSError as exc:
        return exc
    return None


def mapped(path: str) -> mmap.mmap | None:
    """The counter `bump` bumps, mapped read-only; None if there is none yet."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        return mmap.mmap(fd, 8, prot=mmap.PROT_READ) if os.fstat(fd).st_size >= 8 else None
    except (OSError, ValueError):
        return None
    finally:
        os.close(fd)
