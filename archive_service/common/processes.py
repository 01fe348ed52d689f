"""Starting a Python process of ours: which interpreter, and this package importable in it.
Used for the indexer (indexer/follower.py), the announcer (serve/announcer.py) and the
index's reading processes (index/readers.py). Also which process this is (`own_pid`), kept
across forks without asking the kernel."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

from . import logs

_pid = os.getpid()


def own_pid() -> int:
    """This process's id, without a system call (os.getpid is one each time, and a worker
    asked it three times a urlRequest to tell its own connections from a parent's)."""
    return _pid


def _forked() -> None:
    global _pid
    _pid = os.getpid()


os.register_at_fork(after_in_child=_forked)


def python_executable() -> str:
    """The Python to start our own processes with (under mod_wsgi sys.executable may name
    the web server instead)."""
    name = os.path.basename(sys.executable or "")
    if name.startswith("python"):
        return sys.executable
    return (
        shutil.which(f"python{sys.version_info[0]}.{sys.version_info[1]}")
        or shutil.which("python3")
        or sys.executable
    )


def child_environment() -> dict[str, str]:
    """The environment for a Python process of ours: this package importable as it is here,
    logging in this process's format (the log_format setting may come from a file it is not
    given)."""
    env = dict(os.environ)
    env[logs.ENV] = logs.chosen()
    parent = str(Path(__file__).resolve().parents[2])  # the directory holding archive_service/
    env["PYTHONPATH"] = os.pathsep.join(p for p in (parent, env.get("PYTHONPATH")) if p)
    return env
