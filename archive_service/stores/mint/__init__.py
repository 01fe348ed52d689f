"""The mint distributor's store: the last date handed out (última-data-para-sufixo) of an
identification subsystem, read and written under one lock that Algorithm 4
(collection/mint.py `Distributor`) holds from reading the last date, through its wait, to
keeping the new one. Two stores, one module each: `file.FileState` (`state_dir`, the
default) and `postgres.PostgresState` (`mint_last`, shared by nodes); `open_state` picks."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import AbstractContextManager
from decimal import Decimal
from typing import Protocol


class StateError(RuntimeError):
    """The state cannot be read or kept; the text is one line (the minter's MintError)."""


class Held(Protocol):
    """The state while its lock is held: `last` (None before the first date), `keep(t)`."""

    last: Decimal | None

    def keep(self, t: Decimal) -> None: ...


class MintState(Protocol):
    def last(self) -> Decimal | None:
        """The last date handed out, read without the lock (None before the first one)."""

    def held(self) -> AbstractContextManager[Held]:
        """The lock, held until the block ends; raises StateError when the store fails."""


def open_state(
    state_dir: str | os.PathLike[str], database: str = "", prefixes: Iterator[str] | list[str] = ()
) -> MintState:
    """The state in `state_dir`, or with `database` the one every node shares for the label
    forms `prefixes` (`rep:<prefix>`, `ibip:<prefix>`) drawn from one time."""
    from .file import FileState

    if not database:
        return FileState(state_dir)
    from .postgres import PostgresState

    return PostgresState(database, list(prefixes), FileState(state_dir))
