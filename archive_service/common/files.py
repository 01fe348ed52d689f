"""Writing files so that a reader, or a crash, sees the old content or the new, never part."""

from __future__ import annotations

import os
import secrets
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
