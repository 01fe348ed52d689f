"""What the indexer asks of the machine before and while watching: the file system a
collection is on, the kernel's inotify watch limit, the watches an inotify descriptor holds
(Linux /proc; None or empty elsewhere)."""

from __future__ import annotations

import os


def file_system_type(path: str) -> str | None:
    """The type of the file system holding `path` (Linux /proc/self/mountinfo), or None."""
    real = os.path.realpath(path)
    best, kind = "", None
    try:
        with open("/proc/self/mountinfo", encoding="utf-8", errors="replace") as lines:
            for line in lines:
                fields, _, rest = line.partition(" - ")
                parts = fields.split()
                if len(parts) < 5 or not rest:
                    continue
                mount = parts[4].replace("\\040", " ")
                inside = real == mount or real.startswith(mount.rstrip("/") + "/")
                if inside and len(mount) >= len(best):
                    best, kind = mount, rest.split()[0]
    except OSError:
        return None
    return kind


def max_user_watches() -> int | None:
    try:
        with open("/proc/sys/fs/inotify/max_user_watches", encoding="ascii") as f:
            return int(f.read())
    except (OSError, ValueError):
        return None


def inotify_watches() -> dict[int, int]:
    """This process's inotify descriptors and how many watches each holds (/proc fdinfo)."""
    found = {}
    try:
        fds = os.listdir("/proc/self/fd")
    except OSError:
        return found
    for name in fds:
        try:
            if os.readlink(f"/proc/self/fd/{name}") != "anon_inode:inotify":
                continue
            with open(f"/proc/self/fdinfo/{name}", "rb") as info:
                found[int(name)] = info.read().count(b"inotify wd:")
        except OSError:
            continue
    return found
