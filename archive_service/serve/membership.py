"""Which node holds the Archive's membership in the resolution system, when several nodes
(same `archiveserviceibi`, same `database`) serve one Archive.

Exactly one node's announcer holds the membership: a PostgreSQL session advisory lock on its
own connection, keyed by the service IBI. Only the holder sends the inclusionRequest, and
only the holder, when it stops as the last node, the exclusionRequest. Every announcer also
holds a shared "node" lock on the same key while its node runs: the holder counts the other
nodes by looking for those in `pg_locks`.

Why locks and not a lease row with heartbeats: a lock lives exactly as long as its
connection, so the server releases it the moment the holder's process dies (its socket
closes), and after about `postgres.KEEPALIVE_BOUND` seconds when the whole machine vanishes;
there is no clock to trust, no renewal to miss under load, and no expiry to tune between
"takes over fast" and "does not flap". A standby waits queued on the lock (in steps of one
second, to notice its own master going) and gets it as soon as it is free.

No Flask here, and psycopg only when `database` is set.
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Callable

from ..common import postgres
from ..protocol import ibi as ibimod

WAIT_STEP = 1.0  # seconds a standby waits queued on the lock before looking up again
HANDOVER_WAIT = 3.0  # seconds a stopping holder waits for another node to take over

_SAME_LOCK = (
    "FROM pg_locks l WHERE l.locktype = 'advisory' AND l.granted "
    "AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database()) "
    "AND l.classid::bigint = %s AND l.objid::bigint = %s AND l.objsubid = 1"
)


def lock_key(purpose: str, serviceibi: str) -> int:
    """A 64-bit advisory lock key of this Archive (case-insensitive IBI) for `purpose`."""
    return postgres.advisory_key(f"{purpose} {ibimod.key(serviceibi)}")


def _halves(key: int) -> tuple[int, int]:
    """How pg_locks shows a bigint advisory key: its high and low 32 bits as classid, objid."""
    unsigned = key & 0xFFFF_FFFF_FFFF_FFFF
    return unsigned >> 32, unsigned & 0xFFFF_FFFF


def node_name() -> str:
    return f"archive-service announcer {socket.gethostname()} pid {os.getpid()}"


class Membership:
    """This node's connection to the shared database and the locks it holds on it."""

    def __init__(self, url: str, serviceibi: str):
        self.url = url
        self.member = lock_key("member", serviceibi)
        self.node = lock_key("node", serviceibi)
        self.conn = postgres.session(url, node_name())
        self.held = False
        self.conn.execute("SELECT pg_advisory_lock_shared(%s)", (self.node,))

    def close(self) -> None:
        """Close the connection: the server releases every lock of this node."""
        self.held = False
        try:
            self.conn.close()
        except Exception:  # noqa: BLE001 (a dead connection is closed anyway)
            pass

    def acquire(self, stop: Callable[[], bool]) -> bool:
        """Wait queued on the membership until it is ours (True) or `stop()` says to give up."""
        import psycopg

        self.conn.execute(f"SET lock_timeout = '{int(WAIT_STEP * 1000)}ms'")
        while not stop():
            try:
                self.conn.execute("SELECT pg_advisory_lock(%s)", (self.member,))
            except psycopg.errors.LockNotAvailable:
                continue
            self.held = True
            return True
        return False

    def holder(self) -> str:
        """Who holds the membership, as its connection names itself; "" if nobody."""
        row = self.conn.execute(
            "SELECT a.application_name, a.client_addr::text FROM pg_locks l "
            "JOIN pg_stat_activity a ON a.pid = l.pid "
            "WHERE l.mode = 'ExclusiveLock' AND l.pid <> pg_backend_pid() AND "
            + _SAME_LOCK.removeprefix("FROM pg_locks l WHERE "),
            _halves(self.member),
        ).fetchone()
        if row is None:
            return ""
        name, address = row
        return f"{name or 'a node'}" + (f" from {address}" if address else "")

    def others(self) -> int:
        """How many other nodes of this Archive are running (holding the node lock)."""
        row = self.conn.execute(
            f"SELECT count(DISTINCT l.pid) {_SAME_LOCK} AND l.pid <> pg_backend_pid()",
            _halves(self.node),
        ).fetchone()
        return int(row[0])

    def alive(self) -> bool:
        """Whether the connection (and so the locks) still stands."""
        try:
            self.conn.execute("SELECT 1")
            return True
        except Exception:  # noqa: BLE001 (any failure means the locks may be gone)
            self.held = False
            return False

    def leave_node(self) -> None:
        """Stop counting as a running node (before handing over: we are stopping)."""
        self.conn.execute("SELECT pg_advisory_unlock_shared(%s)", (self.node,))

    def hand_over(self, wait: float = HANDOVER_WAIT) -> bool:
        """Release the membership for another node; True once another holds it within `wait`
        seconds. Else take it back (False: we hold it again and are the last) unless one
        took it meanwhile (True)."""
        self.conn.execute("SELECT pg_advisory_unlock(%s)", (self.member,))
        self.held = False
        end = time.monotonic() + wait
        while time.monotonic() < end:
            if self.holder():
                return True
            time.sleep(0.05)
        taken_back = self.conn.execute(
            "SELECT pg_try_advisory_lock(%s)", (self.member,)
        ).fetchone()[0]
        self.held = bool(taken_back)
        return not self.held
