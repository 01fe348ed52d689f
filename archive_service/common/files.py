"""Writing files so that a reader, or a crash, sees the old content or the new, never part."""

from __future__ import annotations

import errno
import os
import secrets
import stat
from pathlib import Path


def write_new(path: Path, text: str) -> None:
    """Create `path` with `text` (the file must not exist), flushed to disk."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)  # mode follows the umask
    with os.fdopen(fd, "w", encoding="utf-8", newline="") as out:
        out.write(text)
        out.flush()
        os.fsync(out.fileno())


def fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def replace_file(path: Path, text: str) -> None:
    """Replace `path` by a file holding `text`: a temporary file beside it, flushed to disk,
    renamed over it, and the rename itself flushed (the directory)."""
    path = Path(path)
    temporary = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")
    try:
        write_new(temporary, text)
        os.replace(temporary, path)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise
    fsync_dir(path.parent)


def open_regular(path: str | os.PathLike[str]) -> int:
    """A blocking descriptor for reading the regular file at `path` (links followed): OSError
    EINVAL when it is not one. Opened without waiting, then checked: a FIFO put where a file
    was found a moment before would otherwise block its reader until some writer came."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise OSError(errno.EINVAL, "not a regular file", os.fspath(path))
    os.set_blocking(fd, True)
    return fd


def link_target(path: str | os.PathLike[str]) -> str:
    """Where the symbolic link at `path` points, to name it in a refusal; a link replaced
    since it was seen (a depositor's rename loop) must not turn the refusal into a traceback."""
    try:
        return os.readlink(path)
    except OSError:
        return "something else now"


def open_no_links(path: str | os.PathLike[str], last_only: bool = False) -> int:
    """A descriptor for reading the regular file at `path` (absolute or not), opened one
    directory at a time so that no part of the path may be a symbolic link: OSError (ELOOP,
    ENOTDIR, EINVAL for a file that is not regular) otherwise. For files checked earlier
    and read now (an import): a link swapped in since, anywhere on the path, is not
    followed, and a FIFO swapped in is refused rather than waited on. `last_only`: only the
    file itself may not be a link (a path the admin typed, whose directories may be)."""
    path = os.path.abspath(path)
    start = os.path.dirname(path) if last_only else "/"
    directory = os.open(start, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        *parents, name = [os.path.basename(path)] if last_only else path.split("/")[1:]
        for part in parents:
            flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
            inner = os.open(part, flags, dir_fd=directory)
            os.close(directory)
            directory = inner
        flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
        fd = os.open(name, flags, dir_fd=directory)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            raise OSError(
                exc.errno, "a symbolic link (or no directory) on its path", path
            ) from None
        raise
    finally:
        os.close(directory)
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise OSError(errno.EINVAL, "not a regular file", path)
    os.set_blocking(fd, True)
    return fd
