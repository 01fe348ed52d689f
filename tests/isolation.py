"""Run part of a test in a forked child: as an unprivileged user (so that chmod bites even when
the suite runs as root) or under a file-size limit (a full disk that hurts nobody else)."""

from __future__ import annotations

import encodings.idna  # noqa: F401  (loaded lazily by Werkzeug; the child may not read its file)
import logging
import os
import pickle
import resource
import shutil
import tempfile
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

NOBODY = 65534


def unprivileged_ids() -> tuple[int, int] | None:
    """(uid, gid) to drop to, or None when the suite already runs unprivileged."""
    return (NOBODY, NOBODY) if os.geteuid() == 0 else None


@contextmanager
def shared_tmp() -> Iterator[Path]:
    """A temporary directory the unprivileged child may use (pytest's tmp_path is 0700 root)."""
    path = Path(tempfile.mkdtemp(prefix="archive-service-test-"))
    try:
        path.chmod(0o755)
        ids = unprivileged_ids()
        if ids:
            os.chown(path, *ids)
        yield path
    finally:
        for root, dirs, _ in os.walk(path):  # chmod 000 left inside must not stop the cleanup
            for name in dirs:
                os.chmod(os.path.join(root, name), 0o755)
        shutil.rmtree(path)


def chown_tree(path: Path) -> None:
    ids = unprivileged_ids()
    if not ids:
        return
    for root, _dirs, files in os.walk(path):
        os.chown(root, *ids)
        for name in files:
            os.chown(os.path.join(root, name), *ids, follow_symlinks=False)


class _Collect(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(f"{record.levelname} {record.name}: {record.getMessage()}")


def in_child(
    fn: Callable[[], Any], *, unprivileged: bool = False, max_file_size: int | None = None
) -> tuple[Any, list[str]]:
    """Run `fn()` in a forked child; return its result and the log lines it produced.
    An exception in the child fails the test with the child's traceback."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        status = 0
        try:
            os.close(read)
            handler = _Collect()
            root = logging.getLogger()
            root.addHandler(handler)
            root.setLevel(logging.INFO)
            ids = unprivileged_ids() if unprivileged else None
            if ids:
                os.setgroups([])
                os.setgid(ids[1])
                os.setuid(ids[0])
            if max_file_size is not None:
                hard = resource.getrlimit(resource.RLIMIT_FSIZE)[1]
                resource.setrlimit(resource.RLIMIT_FSIZE, (max_file_size, hard))
            try:
                outcome = ("ok", fn(), handler.lines)
            except BaseException:
                outcome = ("error", traceback.format_exc(), handler.lines)
            if max_file_size is not None:  # the pipe is not a file, but be safe
                resource.setrlimit(resource.RLIMIT_FSIZE, (hard, hard))
            with os.fdopen(write, "wb") as stream:
                pickle.dump(outcome, stream)
        except BaseException:
            status = 1
        finally:
            os._exit(status)
    os.close(write)
    with os.fdopen(read, "rb") as stream:
        data = stream.read()
    _, status = os.waitpid(pid, 0)
    assert data, f"the child died (status {status})"
    kind, value, lines = pickle.loads(data)
    if kind == "error":
        raise AssertionError("in the child:\n" + value)
    return value, lines
