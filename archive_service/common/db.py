"""Opening our SQLite files (the index, the stores of stores/, the resolver's) one way."""

from __future__ import annotations

import os
import sqlite3


def connect(
    path: str | os.PathLike, *, timeout: float, check_same_thread: bool = True
) -> sqlite3.Connection:
    """A connection in autocommit mode: transactions are explicit (BEGIN … COMMIT), and a
    writer waits up to `timeout` seconds for another's lock."""
    return sqlite3.connect(
        path, timeout=timeout, isolation_level=None, check_same_thread=check_same_thread
    )


def use_wal(conn: sqlite3.Connection, *, durable: bool = False) -> None:
    """WAL: readers never wait for the writer and see only committed transactions. Unless
    `durable`, synchronous=NORMAL: a power loss may lose the last transactions, never the
    file's consistency (what the index and the statistics can afford, not the registry)."""
    conn.execute("PRAGMA journal_mode=WAL")
    if not durable:
        conn.execute("PRAGMA synchronous=NORMAL")


def connect_readonly(path: str | os.PathLike, *, timeout: float) -> sqlite3.Connection:
    """A connection that cannot write (`mode=ro`): a reader (a report, `archive-service stats`
    as another user) of a file the service writes, which must neither create it nor take a
    writer's lock."""
    return sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=timeout)
