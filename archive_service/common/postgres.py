"""PostgreSQL, where state several nodes share lives when `database` names it.

One connection pool per process and URL, made on first use: gunicorn forks its workers after
the master has read the settings, and a connection must never cross a fork. The kit's schema
is versioned per component in `schema_versions` and brought up to date by `upgrade`, which
`archive-service db upgrade` runs and every store runs before its first use; two nodes
upgrading at the same moment are serialised by an advisory lock.

With `database` empty nothing here is imported by the stores: the SQLite default needs neither
psycopg nor libpq.
"""

from __future__ import annotations

import hashlib
import os
import threading
import time
import urllib.parse
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

# The kit's schema, one ordered list of steps per component; a step is never edited once
# released, a change is a new step. Components are the stores that share state: each appends
# its own steps here so that one place shows the whole schema.
SCHEMA: dict[str, list[str]] = {
    # stores/stats/postgres.py PostgresStore: the heads counted (the primary key is what makes an
    # acknowledgment count once across nodes), counts per day and item, refusals per reason.
    "stats": [
        "CREATE TABLE stats_seen_keys (issued bigint NOT NULL, nonce bigint NOT NULL, "
        "PRIMARY KEY (issued, nonce)); "
        "CREATE TABLE stats_counts (day text NOT NULL, ibi text NOT NULL, "
        "contenttype text NOT NULL, state text NOT NULL, n bigint NOT NULL, "
        "PRIMARY KEY (day, ibi, contenttype, state)); "
        "CREATE TABLE stats_rejected (day text NOT NULL, reason text NOT NULL, "
        "n bigint NOT NULL, PRIMARY KEY (day, reason))",
        # The uses COUNTER reports count (stores/stats/counter.py): never an address, a day's hash.
        "CREATE TABLE stats_uses (t double precision NOT NULL, ibi text NOT NULL, "
        "kind text NOT NULL, user_hash text NOT NULL, robot boolean NOT NULL); "
        "CREATE INDEX stats_uses_t ON stats_uses (t); "
        "CREATE TABLE stats_salts (day text PRIMARY KEY, salt bytea NOT NULL)",
        # A finished day's COUNTER figures per item, computed once (stores/stats/ roll_up).
        # and the Access_Type of each use (Open, Controlled: a licensed item).
        "ALTER TABLE stats_uses ADD COLUMN access text NOT NULL DEFAULT 'Open'; "
        "CREATE TABLE stats_uses_days (day text NOT NULL, ibi text NOT NULL, "
        "access text NOT NULL, investigations bigint NOT NULL, "
        "unique_investigations bigint NOT NULL, requests bigint NOT NULL, "
        "unique_requests bigint NOT NULL, PRIMARY KEY (day, ibi, access)); "
        "CREATE TABLE stats_uses_days_done (day text PRIMARY KEY, uses bigint NOT NULL)",
    ],
    # stores/urlkeys/postgres.py: the one secret every node signs and checks urlkeys with.
    "urlkeys": [
        "CREATE TABLE urlkey_secret (id smallint PRIMARY KEY CHECK (id = 1), "
        "secret bytea NOT NULL, created timestamptz NOT NULL DEFAULT now())",
    ],
    # stores/mint/postgres.py: the temporal distributor's last date per prefix.
    "mint": [
        "CREATE TABLE mint_last (prefix text PRIMARY KEY, last numeric)",
    ],
    # stores/mapping/postgres.py: which IBI each imported record became (source, source id).
    "imports": [
        "CREATE TABLE import_map (source text NOT NULL, source_id text NOT NULL, "
        "ibi text NOT NULL, fingerprint text NOT NULL, deleted boolean NOT NULL, "
        "PRIMARY KEY (source, source_id))",
    ],
    # resolver/stores/registry/postgres.py: the registered Archives (the SQLite file's
    # `archive` table).
    "resolver": [
        "CREATE TABLE resolver_archive ("
        " seq bigserial NOT NULL,"  # registration order: the order urlRequests are sent in
        " ibikey text PRIMARY KEY,"  # case-insensitive key of the service IBI
        " serviceibi text NOT NULL,"
        " salt bytea NOT NULL,"
        " keyhash bytea NOT NULL,"  # scrypt(registration key, salt)
        " registered text NOT NULL,"
        " included integer NOT NULL DEFAULT 0,"
        " since text,"
        " address text, ip text, platformversion text, email text,"
        " confirmation text)",
        # resolver/stores/answered/postgres.py: which Archives answered for an IBI, until
        # `expires` (Unix time), shared by the resolver's instances.
        "CREATE TABLE resolver_answered (ibikey text PRIMARY KEY, holders text NOT NULL,"
        " expires double precision NOT NULL)",
        # Its sweep (resolver/stores/answered/ `sweep`): an owner is kept OWNER_GRACE past
        # `expires` and the rows are capped, the soonest to expire going first; the rows with
        # no grace (its UNGRACED, 128 being its KEPT_KEY) go at `expires`.
        "CREATE INDEX resolver_answered_expires ON resolver_answered (expires); "
        "CREATE INDEX resolver_answered_ungraced ON resolver_answered (expires) "
        "WHERE (length(ibikey) > 128 OR holders NOT LIKE '%!%')",
        # The networks an Archive's admin said it sends from (`resolver register --from`).
        "ALTER TABLE resolver_archive ADD COLUMN sends_from text",
    ],
}

# pg_advisory_xact_lock key for upgrades: "archive-service schema" as a number.
_UPGRADE_LOCK = 0x41_52_43_48_53_43_48_4D  # "ARCHSCHM"

_pools: dict[tuple[int, str], Any] = {}
_pools_lock = threading.Lock()
_upgraded: set[tuple[int, str]] = set()
# A server that could not be reached, per process and URL: (when, why). Until RETRY_AFTER
# has passed, pool() fails at once with the same reason instead of waiting out its connect
# timeout again: an outage costs a request that timeout once, not every request.
_down: dict[tuple[int, str], tuple[float, str]] = {}
RETRY_AFTER = 30.0


class DatabaseError(RuntimeError):
    """The database named by `database` cannot be used; the text is one line for an admin."""


def unavailable() -> str | None:
    """Why PostgreSQL cannot be used from this Python, or None when it can."""
    try:
        import psycopg  # noqa: F401
        import psycopg_pool  # noqa: F401
    except ImportError as exc:
        return (
            f"psycopg 3 with its pool is needed for a postgresql:// database ({exc}); "
            "install archive-service[postgresql]"
        )
    return None


def redacted(url: str) -> str:
    """The URL as logs may show it: no password, whatever its spelling."""
    parts = urllib.parse.urlsplit(url)
    host = parts.hostname or ""
    if parts.port:
        host = f"{host}:{parts.port}"
    user = f"{parts.username}@" if parts.username else ""
    return urllib.parse.urlunsplit((parts.scheme, user + host, parts.path, "", ""))


def _check_idle(conn) -> None:
    """The pool's check of a connection it hands out. An idle connection has nothing to read
    unless the server spoke: after a restart (pg_ctl restart, a failover) it sent its FATAL
    and closed, and each pooled connection failed the first statement given to it — an
    acknowledgment arriving with the server up again went uncounted, once per connection
    and process. Only then is the round trip of psycopg_pool's own check paid (raising
    makes the pool discard the connection and hand out another); a poll costs no round trip."""
    from psycopg_pool import ConnectionPool

    from .idle import spoke_while_idle

    if spoke_while_idle(conn.fileno()):
        ConnectionPool.check_connection(conn)


def pool(url: str, max_size: int = 4):
    """This process's pool for `url` (one per process: made anew after a fork)."""
    reason = unavailable()
    if reason:
        raise DatabaseError(reason)
    from psycopg_pool import ConnectionPool

    key = (os.getpid(), url)
    with _pools_lock:
        found = _pools.get(key)
        if found is None:
            down = _down.get(key)
            if down and time.monotonic() - down[0] < RETRY_AFTER:
                raise DatabaseError(down[1])
            found = ConnectionPool(
                url,
                min_size=1,
                max_size=max_size,
                open=False,
                name=f"archive-service {redacted(url)}",
                kwargs={"application_name": "archive-service"},
                check=_check_idle,
            )
            try:
                found.open(wait=True, timeout=10)
            except Exception as exc:
                found.close()
                why = f"database {redacted(url)}: cannot connect ({exc})"
                _down[key] = (time.monotonic(), why)
                raise DatabaseError(why) from None
            _down.pop(key, None)
            _pools[key] = found
        return found


@contextmanager
def transaction(url: str, timeout: float | None = None) -> Iterator[Any]:
    """A connection in one transaction: committed when the block ends, rolled back if it
    raises. The schema is brought up to date first, once per process. `timeout`: seconds to
    wait for a free connection (psycopg_pool.PoolTimeout after; None: the pool's 30 s)."""
    if (os.getpid(), url) not in _upgraded:
        upgrade(url)
    with pool(url).connection(**({} if timeout is None else {"timeout": timeout})) as conn:
        yield conn


@contextmanager
def autocommit(url: str, timeout: float | None = None) -> Iterator[Any]:
    """A connection where each statement is a transaction of its own: one round trip where
    `transaction` takes three (BEGIN, the statement, COMMIT), for a write that is one
    statement. The connection goes back to the pool as `transaction` expects it."""
    with transaction(url, timeout) as conn:
        conn.autocommit = True
        try:
            yield conn
        finally:
            try:
                conn.autocommit = False
            except Exception:  # noqa: BLE001 (a broken connection: the pool discards it)
                pass


def upgrade(url: str) -> list[str]:
    """Apply the steps of SCHEMA the database does not have yet; returns what was applied
    (`component N`), nothing when it was up to date."""
    applied: list[str] = []
    with pool(url).connection() as conn:
        with conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (_UPGRADE_LOCK,))
            conn.execute(
                "CREATE TABLE IF NOT EXISTS schema_versions "
                "(component text PRIMARY KEY, version integer NOT NULL)"
            )
            have = dict(conn.execute("SELECT component, version FROM schema_versions").fetchall())
            for component, steps in SCHEMA.items():
                done = have.get(component, 0)
                if done > len(steps):
                    raise DatabaseError(
                        f"database {redacted(url)}: {component} schema version {done} is newer "
                        f"than this archive-service knows ({len(steps)}); upgrade the kit"
                    )
                for number, step in enumerate(steps[done:], start=done + 1):
                    conn.execute(step)
                    applied.append(f"{component} {number}")
                if len(steps) > done:
                    conn.execute(
                        "INSERT INTO schema_versions VALUES (%s, %s) ON CONFLICT (component) "
                        "DO UPDATE SET version = excluded.version",
                        (component, len(steps)),
                    )
    _upgraded.add((os.getpid(), url))
    return applied


def close_all() -> None:
    """Close this process's pools (at exit, or in tests)."""
    with _pools_lock:
        for key in [k for k in _pools if k[0] == os.getpid()]:
            _pools.pop(key).close()
        _upgraded.clear()
        _down.clear()


# A node that vanishes (power, network) holds its session's advisory locks until the server
# sees its connection die: these make the server probe an idle connection after 5 s and give
# up after 3 unanswered probes 2 s apart, so within about 11 s; libpq does the same from the
# node's side, so a holder cut off from the server learns it within that time too.
KEEPALIVE_IDLE, KEEPALIVE_INTERVAL, KEEPALIVE_COUNT = 5, 2, 3
KEEPALIVE_BOUND = KEEPALIVE_IDLE + KEEPALIVE_INTERVAL * KEEPALIVE_COUNT


def advisory_key(text: str) -> int:
    """The 64-bit key of a PostgreSQL advisory lock named by `text` (the same on every node)."""
    digest = hashlib.sha256(f"archive-service {text}".encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


def session(url: str, application_name: str):
    """A connection of its own, outside the pool, in autocommit: for session state (advisory
    locks) that must live exactly as long as this connection."""
    reason = unavailable()
    if reason:
        raise DatabaseError(reason)
    import psycopg

    server_side = (
        f"-c tcp_keepalives_idle={KEEPALIVE_IDLE} "
        f"-c tcp_keepalives_interval={KEEPALIVE_INTERVAL} "
        f"-c tcp_keepalives_count={KEEPALIVE_COUNT} "
        f"-c tcp_user_timeout={KEEPALIVE_BOUND * 1000}"
    )
    try:
        return psycopg.connect(
            url,
            autocommit=True,
            connect_timeout=10,
            application_name=application_name[:63],
            keepalives=1,
            keepalives_idle=KEEPALIVE_IDLE,
            keepalives_interval=KEEPALIVE_INTERVAL,
            keepalives_count=KEEPALIVE_COUNT,
            options=server_side,
        )
    except psycopg.Error as exc:
        message = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise DatabaseError(f"database {redacted(url)}: cannot connect ({message})") from None
