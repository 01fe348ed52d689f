"""Addresses and names, for both apps and the commands: the user behind the trusted proxies
(`forwarded`, `client_address`), a host's addresses (`host_addresses`), a set of networks
with host names resolved off the request path (`HostNetworks`), and an IBI's persistent URL
at the configured resolver (`persistent_url`). No web framework: a WSGI environ is a
mapping."""

from __future__ import annotations

import functools
import ipaddress
import logging
import socket
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

log = logging.getLogger(__name__)

Address = ipaddress.IPv4Address | ipaddress.IPv6Address
Network = ipaddress.IPv4Network | ipaddress.IPv6Network
LOOPBACK: tuple[Network, ...] = (
    ipaddress.ip_network("127.0.0.0/8"),
    ipaddress.ip_network("::1/128"),
)
LOCAL = ipaddress.ip_address("127.0.0.1")


def address(text: str) -> Address | None:
    """An IP address, or None; an IPv4 user as a dual-stack socket gives it (::ffff:a.b.c.d)
    is that IPv4 address."""
    try:
        found = ipaddress.ip_address(text.strip())
    except ValueError:
        return None
    return getattr(found, "ipv4_mapped", None) or found


def within(found: Address, networks: Iterable[Network]) -> bool:
    return any(found.version == net.version and found in net for net in networks)


@dataclass(frozen=True)
class Forwarded:
    """A request's user (None: unknown) and the trusted proxies it came through, the one
    nearest the user first (the connection's peer last)."""

    user: Address | None
    proxies: tuple[Address, ...] = ()


def forwarded(environ: Mapping[str, Any], trusted: Iterable[Network]) -> Forwarded:
    """The user: the connection's address (REMOTE_ADDR), unless that is a trusted proxy; then
    X-Forwarded-For is read from the right (each proxy appends whom it heard from), and the
    first address that is not a trusted proxy is the user's. Entries left of it are whatever
    the client wrote: never read. An entry that is no address makes the user unknown. A peer
    on a Unix socket (no REMOTE_ADDR) is a local proxy, as gunicorn takes it; one that names
    no one is itself the user, on this machine: loopback."""
    remote = environ.get("REMOTE_ADDR", "")
    forwarded_for = environ.get("HTTP_X_FORWARDED_FOR", "")
    if len(forwarded_for) > _KEPT_CHAIN:  # a client's long header is not worth keeping
        return _forwarded(remote, forwarded_for, tuple(trusted))
    return _kept_forwarded(remote, forwarded_for, tuple(trusted))


# Characters of X-Forwarded-For worth remembering: a chain of a few proxies. A resolver or a
# proxy sends the same few (REMOTE_ADDR, X-Forwarded-For) over and over, and parsing them
# (ipaddress, each hop against every trusted network) was ~50 us of an acknowledgment's
# ~320 us in process (issue 35).
_KEPT_CHAIN = 256


def _forwarded(remote: str, forwarded_for: str, trusted: tuple[Network, ...]) -> Forwarded:
    if not remote and not forwarded_for:
        return Forwarded(LOCAL)
    hops = [remote] if remote else []
    hops += reversed(forwarded_for.split(",")) if forwarded_for else []
    proxies: list[Address] = []
    for hop in hops:
        found = address(hop)
        if found is None:
            return Forwarded(None, tuple(reversed(proxies)))
        if not within(found, trusted):
            return Forwarded(found, tuple(reversed(proxies)))
        proxies.append(found)
    # Every hop a trusted proxy: the farthest one asked itself.
    farthest = proxies.pop()
    return Forwarded(farthest, tuple(reversed(proxies)))


_kept_forwarded = functools.lru_cache(maxsize=1024)(_forwarded)


def client_address(environ: Mapping[str, Any], trusted: Iterable[Network]) -> Address | None:
    """The user's address as `forwarded` decides it; None when unknown."""
    return forwarded(environ, trusted).user


def host_addresses(host: str) -> set[Address]:
    """The addresses `host` (a name or an address) stands for; empty when it resolves to
    none. A name under .localhost is loopback (RFC 6761) without asking DNS."""
    try:
        return {ipaddress.ip_address(host.strip("[]"))}
    except ValueError:
        pass
    if host == "localhost" or host.endswith(".localhost"):
        return {ipaddress.ip_address("127.0.0.1")}
    try:
        infos = socket.getaddrinfo(host, None, proto=socket.IPPROTO_TCP)
    except (OSError, UnicodeError):
        return set()
    return {ipaddress.ip_address(info[4][0].split("%")[0]) for info in infos}


RESOLVED_FOR = 3600.0  # seconds a host's addresses are used before they are looked up again
FAILED_FOR = 60.0  # seconds before a host that resolved to nothing is looked up again


class HostNetworks:
    """Networks, plus the addresses of a few host names looked up when made and again in a
    thread of its own at most every RESOLVED_FOR seconds (FAILED_FOR after a failure), so that
    `__contains__` never waits on DNS. A host that resolves to nothing is a WARNING and
    stands for no address until it resolves; a host on loopback stands for all of loopback
    (a local peer connects from 127.0.0.1 or ::1 as it likes)."""

    def __init__(
        self,
        networks: Iterable[Network] = (),
        hosts: Iterable[str] = (),
        what: str = "host",
        lookup: Callable[[str], set[Address]] = host_addresses,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.networks = tuple(networks)
        self.hosts = tuple(hosts)
        self._what = what
        self._lookup = lookup
        self._clock = clock
        self._lock = threading.Lock()
        self._looking = False
        self.resolved: tuple[Network, ...] = ()
        self._due = 0.0
        self._failed: set[str] = set()
        if self.hosts:
            self.refresh()

    def refresh(self) -> None:
        """Look the hosts up now (blocking: when made, or in the refreshing thread)."""
        found: set[Network] = set()
        failed = set()
        for host in self.hosts:
            addresses = self._lookup(host)
            if not addresses:
                failed.add(host)
            for one in addresses:
                found.update(LOOPBACK if one.is_loopback else (ipaddress.ip_network(one),))
        for host in failed - self._failed:
            log.warning(
                "%s %s resolves to no address: nothing from it counts until it does "
                "(looked up again every %g s)",
                self._what,
                host,
                FAILED_FOR,
            )
        for host in self._failed - failed:
            log.info("%s %s resolves again", self._what, host)
        with self._lock:
            self.resolved = tuple(sorted(found, key=lambda n: (n.version, n)))
            self._failed = failed
            self._due = self._clock() + (FAILED_FOR if failed else RESOLVED_FOR)
            self._looking = False

    def _refresh_later(self) -> None:
        with self._lock:
            if self._looking or self._clock() < self._due:
                return
            self._looking = True
        # Started by a request, so in a serving process (never gunicorn's master before fork).
        threading.Thread(target=self._refresh_quietly, name="host-lookup", daemon=True).start()

    def _refresh_quietly(self) -> None:
        try:
            self.refresh()
        except Exception:  # a lookup must not end the process's lookups for good
            log.exception("looking up %s", ", ".join(self.hosts))
            with self._lock:
                self._looking = False
                self._due = self._clock() + FAILED_FOR

    def __contains__(self, found: Address) -> bool:
        if self.hosts:
            self._refresh_later()
        return within(found, self.networks) or within(found, self.resolved)


def persistent_url(resolver: str, ibi: str) -> str | None:
    """The persistent URL of `ibi` at the resolver this Archive announces itself to (the
    `resolver` setting: `http://urlib.net/<ibi>` for urlib.net's service URL), or None when
    it has none (`none`). Every URL of an IBI the kit writes or shows comes from here."""
    if resolver == "none":
        return None
    parts = urlsplit(resolver)
    return f"{parts.scheme}://{parts.netloc}/{ibi}"


HTTP_PORT = 80


def host_port(address: str, default: int | None = HTTP_PORT) -> tuple[str, int | None]:
    """`host[:port]` (an archiveaddress, a bind) as (host, port): the host as written, without
    the brackets of an IPv6 address ("" when none), the port `default` when none is given.
    ValueError for a port that is not a number."""
    parts = urlsplit("//" + address)
    return parts.hostname or "", parts.port or default


def is_loopback_host(host: str) -> bool:
    """Whether a host names this machine only: a loopback address, `localhost` or a name
    under `.localhost` (RFC 6761)."""
    found = address(host.strip("[]"))
    if found is None:
        try:  # the forms the resolver library takes too: 127.1, 0x7f.1, 2130706433
            found = ipaddress.IPv4Address(socket.inet_aton(host))
        except (OSError, ValueError):
            host = host.lower().rstrip(".")
            return host == "localhost" or host.endswith(".localhost")
    return found.is_loopback


def proxy_warning(program: str, bind: str, trusted_proxies: Iterable[str]) -> str | None:
    """What an admin serving the Internet with `program` (`serve`, `resolver serve`) alone
    should know: gunicorn holds a thread per connection, so slow clients starve it (300
    connections sending a byte at a time left a probe of `serve` 42 s unanswered and one of
    `resolver serve` over 60 s; behind nginx, 1.6 and 3.2 ms). None when it listens on
    loopback or a Unix socket, or when trusted_proxies names a proxy elsewhere."""
    host = bind.rpartition(":")[0]
    if bind.startswith("unix:") or is_loopback_host(host):
        return None
    if any(not ipaddress.ip_network(n).is_loopback for n in trusted_proxies):
        return None  # the admin named a proxy on another machine: it is in front
    return (
        f"{program} listens on {bind} with no proxy in front (trusted_proxies names none "
        "but loopback): slow clients hold its threads and starve every other client; put it "
        "behind nginx or Apache (contrib/) listening on 127.0.0.1, or name the proxy's "
        "address in trusted_proxies"
    )
