"""The registry in SQLite (the default): one file, WAL, durable."""

from __future__ import annotations

import logging
import sqlite3
import threading
import time
from contextlib import closing, contextmanager
from pathlib import Path

from ....common import changes
from ....common import db as dbmod
from ....common.processes import own_pid
from . import RegistryError

log = logging.getLogger("archive_service.resolver.registry")

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
    confirmation TEXT,                -- successful | unsuccessful
    sends_from TEXT                   -- networks its admin said it sends from (register --from)
)
"""
# Added after the first release: a file made before it gets the column on opening.
_ADDED = {"sends_from": "ALTER TABLE archive ADD COLUMN sends_from TEXT"}


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
                have = {row[1] for row in conn.execute("PRAGMA table_info(archive)")}
                for column, sql in _ADDED.items():
                    if column not in have:
                        try:
                            conn.execute(sql)
                        except sqlite3.OperationalError as exc:  # another process first
                            if "duplicate column" not in str(exc):
                                raise
        except (OSError, sqlite3.Error) as exc:
            raise RegistryError(f"registry {path}: {exc}") from None

    # Without news from the changes counter, data_version is still asked this often (a
    # write by a version of the kit without the counter, or a counter that cannot be written).
    READ_EVERY = 1.0

    def version(self) -> tuple:
        """Changes whenever another connection has committed to the file (PRAGMA
        data_version, asked on a connection this thread keeps), asked only when the changes
        counter every write of ours bumps moved, or READ_EVERY seconds after it was last
        asked: re-reading the included Archives only then saves the connection and the query
        of every resolution, and the interpreter given away to other threads for the PRAGMA
        each round (issue 35)."""
        local = self._local.__dict__
        if local.get("pid") != own_pid():
            local.update(pid=own_pid(), conn=dbmod.connect(self.path, timeout=10), asked=None)
        counter, now, asked = local.get("counter"), time.monotonic(), local["asked"]
        seen = counter[:8] if counter is not None else None
        fresh = asked is not None and now - asked[1] < self.READ_EVERY
        if fresh and seen is not None and seen == asked[0]:
            return asked[2]
        if counter is None:  # none yet: made by the first write
            counter = local["counter"] = changes.mapped(self.changes_path)
            seen = counter[:8] if counter is not None else None
        version = (id(local["conn"]), local["conn"].execute("PRAGMA data_version").fetchone()[0])
        local["asked"] = (seen, now, version)  # the counter first: a write in between is seen
        return version

    @property
    def changes_path(self) -> str:
        return f"{self.path}.changes"

    @contextmanager
    def session(self):
        conn = dbmod.connect(self.path, timeout=10)
        conn.row_factory = sqlite3.Row
        with closing(conn):
            try:
                yield lambda sql, params=(): [dict(r) for r in conn.execute(sql, params).fetchall()]
            finally:  # autocommit: what was written is committed, whatever came after
                if conn.total_changes and (exc := changes.bump(self.changes_path)):
                    log.warning(
                        "cannot write %s (%s): resolutions see changes up to a second later",
                        self.changes_path,
                        exc.strerror,
                    )
