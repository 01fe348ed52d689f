"""The registry in SQLite (the default): one file, WAL, durable."""

from __future__ import annotations

import os
import sqlite3
import threading
from contextlib import closing, contextmanager
from pathlib import Path

from ....common import db as dbmod
from . import RegistryError

_SCHEMA = """
CREATE TABLE IF NOT EXISTS archive (
    ibikey TEXT PRIMARY KEY,          -- case-insensitive key of the service IBI
    serviceibi TEXT NOT NULL,         -- as registered
    salt BLOB NOT NULL,
    keyhash BLOB NOT NULL,            -- scrypt(registration key, salt)
    registered TEXT NOT NULL,
    included INTEGER NOT NULL DEFAULT 0,
    since TEXT,                       -- time of the last inclusion or exclusion
    address TEXT, ip TEXT, platformversion TEXT, email TEXT,
    confirmation TEXT                 -- successful | unsuccessful
)
"""


class SQLiteRegistry:
    """The registry as one SQLite file; a connection per call, so threads and gunicorn
    workers share it safely."""

    table, order = "archive", "rowid"

    def __init__(self, path: Path):
        self.path = path
        self.where = str(path)
        self._local = threading.local()
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            with closing(dbmod.connect(path, timeout=10)) as conn:
                dbmod.use_wal(conn, durable=True)
                conn.execute(_SCHEMA)
        except (OSError, sqlite3.Error) as exc:
            raise RegistryError(f"registry {path}: {exc}") from None

    def version(self) -> tuple:
        """Changes whenever another connection has committed to the file (PRAGMA
        data_version, asked on a connection this thread keeps): re-reading the included
        Archives only then saves the connection and the query of every resolution, most of
        its cost on a small registry."""
        local = self._local.__dict__
        if local.get("pid") != os.getpid():
            local.update(pid=os.getpid(), conn=dbmod.connect(self.path, timeout=10))
        return (id(local["conn"]), local["conn"].execute("PRAGMA data_version").fetchone()[0])

    @contextmanager
    def session(self):
        conn = dbmod.connect(self.path, timeout=10)
        conn.row_factory = sqlite3.Row
        with closing(conn):
            yield lambda sql, params=(): [dict(r) for r in conn.execute(sql, params).fetchall()]
