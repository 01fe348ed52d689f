"""An Archive's name looked up without holding the asking thread past the round's deadline.

`socket.getaddrinfo` takes no time limit: an included Archive whose `archiveaddress` names a
host whose DNS server never answers held a thread of the resolver's pool for the resolver
library's whole retry cycle (10-30 s against a 5.5 s round), once per round, until the pool
was full and good Archives' answers timed out (the adversarial pass over issue 30). Here a
name is looked up by one thread of its own at a time, whoever asks; askers wait for it only
until their deadline, and what it found (an error too) is kept LOOKUP_FOR seconds.
"""

from __future__ import annotations

import os
import socket
import threading
import time
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout

LOOKUP_FOR = 30.0  # seconds a name's addresses, or its failure, are used before asking again
KEPT = 4096  # names kept at most (one per included Archive's address)

_lock = threading.Lock()
_pid = 0
_names: dict[tuple[str, int], tuple[float, Future]] = {}
# The address each name was last connected to (archives.py `_connect`): of a name's addresses,
# the one that answered, which a hostile's DNS cannot choose by listing another's beside its own.
_reached: dict[tuple[str, int], str] = {}


class LookupTimeout(OSError):
    """The name was not looked up before the deadline (the lookup goes on for the next)."""


def addresses(host: str, port: int, deadline: float) -> list[tuple]:
    """getaddrinfo's TCP answers for `host`, waited for until `deadline` (monotonic)."""
    try:  # an address needs no DNS: answered at once
        return socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_NUMERICHOST)
    except socket.gaierror:
        pass
    found = _lookup(host, port)
    try:
        return found.result(timeout=max(0.0, deadline - time.monotonic()))
    except FutureTimeout:
        raise LookupTimeout(f"the name {host} was not looked up in time") from None


def reached(host: str, port: int, where: str) -> None:
    """`host`:`port` was connected to at the address `where`."""
    with _lock:
        if len(_reached) >= KEPT:
            _reached.clear()
        _reached[(host, port)] = where


def reached_at(host: str, port: int) -> str | None:
    """The address `host`:`port` was last connected to in this process, None if never."""
    return _reached.get((host, port))


def _lookup(host: str, port: int) -> Future:
    global _pid
    now = time.monotonic()
    with _lock:
        if _pid != os.getpid():  # a lookup under way in the parent has no thread here
            _names.clear()
            _reached.clear()
            _pid = os.getpid()
        kept = _names.get((host, port))
        if kept is not None and (not kept[1].done() or kept[0] > now):
            return kept[1]
        if len(_names) >= KEPT:
            for key in [k for k, (_, f) in _names.items() if f.done()]:
                del _names[key]
        found: Future = Future()
        _names[(host, port)] = (now + LOOKUP_FOR, found)
    threading.Thread(
        target=_resolve, args=(host, port, found), name="archive-lookup", daemon=True
    ).start()
    return found


def _resolve(host: str, port: int, found: Future) -> None:
    try:
        found.set_result(socket.getaddrinfo(host, port, type=socket.SOCK_STREAM))
    except Exception as exc:  # noqa: BLE001 - the asker raises it as its own
        found.set_exception(exc)
