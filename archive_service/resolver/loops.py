"""A request that comes back to this resolver: recognised by the `Via` entry the resolver
adds to every request it sends (`loop_reason`), and refused at inclusion when an Archive's
address is the resolver's own (`OwnAddress`).

Every request to an Archive carries a `Via` entry naming this resolver (after the ones of the
request that caused it), so a request that comes back to the resolver, through an Archive
registered at its own address or through other resolvers of this kit, is answered at once
instead of being resolved again, recursively, until the timeout.
"""

from __future__ import annotations

import secrets
import socket

from ..common.net import host_addresses as _addresses
from ..common.net import host_port

PSEUDONYM = "archive-service-resolver"
MAX_HOPS = 4  # resolvers of this kit a request may already have passed through


def new_pseudonym() -> str:
    """This resolver's name in Via headers: made once per start, before gunicorn forks, so
    every worker knows it (workers that made their own would still see the loop: see
    `loop_reason`)."""
    return f"{PSEUDONYM}-{secrets.token_hex(6)}"


def _via_names(via: str) -> list[str]:
    """The received-by names of a Via header (RFC 9110 §7.6.3: `1.1 name (comment)`, …)."""
    names = []
    for entry in via.split(","):
        words = entry.split()
        if len(words) >= 2:
            names.append(words[1])
    return names


def loop_reason(via: str, pseudonym: str) -> str | None:
    """Why a request with this Via header must not be resolved again, or None.

    The request was sent by this very resolver (its own pseudonym is listed), or it has
    already passed through MAX_HOPS resolvers of this kit: a loop across resolvers whose
    workers each have their own pseudonym ends at the latest when it comes round again."""
    names = _via_names(via)
    if pseudonym in names:
        return (
            "loop: this request was sent by this resolver itself (an Archive is "
            "registered at the resolver's own address)"
        )
    hops = sum(name.startswith(PSEUDONYM) for name in names)
    if hops >= MAX_HOPS:
        return f"loop: this request has already passed through {hops} resolvers"
    return None


class OwnAddress:
    """Whether an Archive's `archiveaddress` is this resolver itself (its bind address or its
    public `address`, in any spelling): an Archive there makes every resolution ask the
    resolver again. The public name is compared as a name only: another site behind the
    same proxy and IP address is a different Archive."""

    def __init__(self, bind: str, address: str = ""):
        self.public = _split(address) if address else None
        self.bind = None if bind.startswith("unix:") else _split(bind)

    def __call__(self, archiveaddress: str) -> bool:
        host, port = _split(archiveaddress)
        if self.public and (host, port) == self.public:
            return True
        if self.bind is None or port != self.bind[1]:
            return False
        bound = _addresses(self.bind[0])
        for ip in _addresses(host):
            if ip in bound:
                return True
            if ip.is_loopback and any(b.is_loopback or b.is_unspecified for b in bound):
                return True
            if any(b.is_unspecified for b in bound) and _is_local(ip):
                return True
        return False


def _split(hostport: str) -> tuple[str, int | None]:
    host, port = host_port(hostport)
    return host.rstrip(".").lower(), port


def _is_local(ip) -> bool:
    """Whether `ip` is one of this machine's addresses: only those can be bound."""
    family = socket.AF_INET6 if ip.version == 6 else socket.AF_INET
    try:
        with socket.socket(family, socket.SOCK_STREAM) as probe:
            probe.bind((str(ip), 0))
        return True
    except OSError:
        return False
