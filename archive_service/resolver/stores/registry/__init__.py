"""The registry's store: the registered Archives as rows of one table, read and written by
resolver/registry.py in SQL both backends speak (`?` marks, the table as `{table}`). A store
gives `table`, `order` (the registration order's column), `where` (for messages),
`version()` (changes whenever the included Archives may have) and `session()` (a context
whose `run(sql, params)` gives rows as dicts). Two stores, one module each:
`sqlite.SQLiteRegistry` (`state_dir/registry.sqlite3`, the default) and
`postgres.PostgresRegistry` (the resolver's `database`); `open_registry` picks."""

from __future__ import annotations

import os
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Protocol


class RegistryError(Exception):
    """The registry database cannot be used (state directory missing, unwritable, corrupt)."""


class RegistryStore(Protocol):
    table: str
    order: str
    where: str

    def version(self) -> tuple: ...

    def session(self) -> AbstractContextManager: ...


def open_registry(state_dir: str | os.PathLike | None, database: str = "") -> RegistryStore:
    """The registry in the resolver's `database` when it names one, else in `state_dir`."""
    if database:
        from .postgres import PostgresRegistry

        return PostgresRegistry(database)
    from ...config import REGISTRY_FILE
    from .sqlite import SQLiteRegistry

    return SQLiteRegistry(Path(state_dir) / REGISTRY_FILE)
