"""The mint distributor's state in `state_dir` (the default): the last date in
`state_dir/mint-last-date`, so labels never repeat across processes and restarts. The lock
is an exclusive `flock` on `state_dir/mint.lock`, a file of its own because os.replace gives
the state file a new inode at every write (temp file, fsync, os.replace, fsync of the
directory). flock locks belong to open files, so threads of one process exclude each other
too."""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from pathlib import Path

from ...common import files
from . import StateError

STATE_FILE = "mint-last-date"  # última-data-para-sufixo, one decimal POSIX time
LOCK_FILE = "mint.lock"  # never replaced, so every process locks the same inode


@dataclass
class _Held:
    state: FileState
    last: Decimal | None

    def keep(self, t: Decimal) -> None:
        files.replace_file(self.state.state_path, f"{t}\n")


class FileState:
    def __init__(self, state_dir: str | os.PathLike[str]) -> None:
        self.state_dir = Path(state_dir)
        self.state_path = self.state_dir / STATE_FILE
        self.lock_path = self.state_dir / LOCK_FILE

    def last(self) -> Decimal | None:
        try:
            text = self.state_path.read_text(encoding="ascii").strip()
        except FileNotFoundError:
            return None
        try:
            value = Decimal(text)
        except InvalidOperation:
            value = None
        if value is None or not value.is_finite():
            # Starting afresh could hand out a date already used: refuse instead.
            raise StateError(
                f"{self.state_path} holds {text!r}, not a POSIX time; fix or remove it"
            )
        return value

    @contextmanager
    def held(self) -> Iterator[_Held]:
        self.state_dir.mkdir(parents=True, exist_ok=True)
        with open(self.lock_path, "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file is closed
            yield _Held(self, self.last())
