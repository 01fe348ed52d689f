"""Whether a kept, idle connection is still good to write a request on: shared by the
resolver's connections to Archives and the pooled connections to PostgreSQL."""

from __future__ import annotations

import select
import socket


def spoke_while_idle(conn: socket.socket | int) -> bool:
    """Whether the peer has spoken on this idle connection (closed it, or sent what it should
    not): it can be read from before anything was asked of it. A poll, no round trip.
    poll, not select: select refuses descriptors from 1024 on (a busy worker's), which read
    as closed, so no connection was ever reused."""
    poller = select.poll()
    poller.register(conn, select.POLLIN)
    return bool(poller.poll(0))
