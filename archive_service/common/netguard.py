"""Whether an address is internal, and connections that never reach one (issue 30).

What the kit fetches from elsewhere (`check --links`, the OAI-PMH harvester) would otherwise
reach whatever a name, a link or a redirect points at: 127.0.0.1, [::1], the cloud's
169.254.169.254, the private network behind the Archive; and a checker whose output tells
"connection refused" from "HTTP 403" is a port scanner for whoever writes the links. Here a
host is resolved once, every address it resolves to is checked (a name that resolves to
127.0.0.1 is internal), and the connection is made to those checked addresses only: a name
whose answer changes between a check and a connection (DNS rebinding) reaches nothing else.
An internal address is refused before any packet is sent to it, so nothing it would have
answered shows.

Internal: any address that is not globally routable (`ipaddress`'s `is_global`): loopback,
link-local, private ranges, the shared 100.64/10, unspecified (0.0.0.0 reaches this host),
reserved and documentation ranges; an IPv4-mapped IPv6 address as its IPv4 address.

Standard library only; no module of ours.
"""

from __future__ import annotations

import ipaddress
import socket


class InternalAddress(ConnectionError):
    """A connection refused by us, before any packet: `host` is or resolves to an internal
    address. An OSError, so that urllib reports it as a URLError's reason."""

    def __init__(self, host: str, address: str, kind: str):
        self.host, self.address, self.kind = host, address, kind
        where = host if host == address else f"{host} ({address})"
        super().__init__(f"{where} is an internal address ({kind}), not contacted")


def kind(address: str) -> str | None:
    """Why `address` (an IP address as text) is internal, or None for a public one."""
    try:
        ip = ipaddress.ip_address(address.split("%", 1)[0])
    except ValueError:
        return "not an IP address"
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.is_site_local:  # fec0::/10: deprecated, but routed inside some networks
            return "site-local"
        ip = _embedded_ipv4(ip) or ip
    if ip.is_loopback:
        return "loopback"
    if ip.is_unspecified:
        return "unspecified, this host"
    if ip.is_link_local:
        return "link-local"
    if ip.is_private:
        return "private"
    if ip.is_multicast or not ip.is_global:
        return "not publicly routable"
    return None


NAT64 = ipaddress.ip_network("64:ff9b::/96")  # RFC 6052's well-known prefix


def _embedded_ipv4(ip: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 one carries and may reach (mapped, translated, compatible,
    NAT64, 6to4), judged as that address: `::7f00:1` is loopback, `64:ff9b::a9fe:a9fe`
    link-local."""
    if ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    if ip.sixtofour is not None:
        return ip.sixtofour
    high = int(ip) >> 32
    # NAT64; IPv4-translated ::ffff:0:a.b.c.d; IPv4-compatible ::a.b.c.d (not :: nor ::1)
    if ip in NAT64 or high == 0xFFFF0000 or (high == 0 and int(ip) > 1):
        return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    return None


def resolve(host: str, port: int) -> list[tuple]:
    """getaddrinfo's TCP answers for `host`, each checked: InternalAddress for the first
    internal one (one is enough: which of them a connection reaches is not ours to pick)."""
    answers = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    for answer in answers:
        address = answer[4][0]
        reason = kind(address)
        if reason is not None:
            raise InternalAddress(host, address, reason)
    return answers


def connect(
    host: str,
    port: int,
    timeout: object = None,
    source_address: tuple[str, int] | None = None,
    *,
    allow_internal: bool = False,
) -> socket.socket:
    """`socket.create_connection((host, port), …)`, but only to the addresses `resolve`
    checked (all of them, unless `allow_internal`)."""
    answers = (
        socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        if allow_internal
        else resolve(host, port)
    )
    error: OSError | None = None
    for family, kind_, proto, _, address in answers:
        sock = socket.socket(family, kind_, proto)
        try:
            # http.client hands its "global default" sentinel when no timeout was given.
            if isinstance(timeout, (int, float)):
                sock.settimeout(timeout)
            if source_address:
                sock.bind(source_address)
            sock.connect(address)
            return sock
        except OSError as exc:
            error = exc
            sock.close()
    raise error if error is not None else OSError(f"{host}: no address to connect to")
