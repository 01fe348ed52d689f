"""The one launcher of a throwaway PostgreSQL server: Debian's own binaries, a cluster of its
own in a temporary directory, listening on a free loopback port, trust authentication.
PostgreSQL refuses to run as root, so as root the cluster belongs to (and runs as) the
`postgres` user Debian's package creates."""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import subprocess
import tempfile
import uuid
from pathlib import Path

from serve_process import free_port


def binaries() -> Path | None:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"))
    if found:
        return Path(found[-1]).parent
    pg_ctl = shutil.which("pg_ctl")
    return Path(pg_ctl).parent if pg_ctl else None


def unavailable() -> str | None:
    """Why no PostgreSQL server can be started here, or None."""
    if binaries() is None:
        return "PostgreSQL's server binaries (Debian package postgresql) are not installed"
    from archive_service.common import postgres

    reason = postgres.unavailable()
    if reason:
        return reason
    if os.geteuid() == 0:
        try:
            pwd.getpwnam("postgres")
        except KeyError:
            return "running as root and there is no postgres user to run the server as"
    return None


class PostgresServer:
    def __init__(self) -> None:
        self.bin = binaries()
        self.dir = Path(tempfile.mkdtemp(prefix="archive-service-pg-"))
        self.port = free_port()
        self.user = "archive"
        self._as: list[str] = []
        if os.geteuid() == 0:
            owner = pwd.getpwnam("postgres")
            os.chown(self.dir, owner.pw_uid, owner.pw_gid)
            self._as = ["runuser", "-u", "postgres", "--"]

    def _run(self, *argv: str) -> None:
        subprocess.run(
            [*self._as, *argv], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
        )

    def start(self) -> PostgresServer:
        data = self.dir / "data"
        self._run(
            str(self.bin / "initdb"),
            "-D",
            str(data),
            "-U",
            self.user,
            "-A",
            "trust",
            "-E",
            "UTF8",
            "--no-sync",
        )
        self._run(
            str(self.bin / "pg_ctl"),
            "-D",
            str(data),
            "-l",
            str(self.dir / "log"),
            "-w",
            "-t",
            "60",
            "-o",
            f"-c listen_addresses=127.0.0.1 -p {self.port} -k {self.dir} -c fsync=off "
            "-c max_connections=200",
            "start",
        )
        return self

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://{self.user}@127.0.0.1:{self.port}/{database}"

    def new_database(self) -> str:
        """A fresh, empty database on this server; its URL."""
        import psycopg

        name = "t_" + uuid.uuid4().hex[:12]
        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)

    def stop(self) -> None:
        try:
            self._run(
                str(self.bin / "pg_ctl"), "-D", str(self.dir / "data"), "-m", "immediate", "stop"
            )
        except subprocess.CalledProcessError:
            pass
        shutil.rmtree(self.dir, ignore_errors=True)
