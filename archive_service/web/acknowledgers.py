"""Whose acknowledgments count (SPEC §8 `resolver_networks`): the resolver's, not anyone's.

Any client can send an acknowledgment with the urlkey of an answer it asked for itself, and
name any user in `clientinformation.ipaddress`: counted, 500 such pairs from one client made
500 COUNTER users. So an acknowledgment counts only when its sender (the address
`trusted_proxies` decides, common/net.py) is in `resolver_networks`; by default the
configured resolver host's addresses (looked up when the app is made, then in the
background: a request never waits on DNS), plus loopback only when `resolver` is `none` or
itself on loopback. Any other sender gets the protocol's answer all the same and its
acknowledgment is refused as `not-resolver` (stores/stats/).
"""

from __future__ import annotations

import ipaddress
from urllib.parse import urlsplit

from .. import settings
from ..common.net import LOOPBACK, HostNetworks


def acknowledgers(config: settings.Config) -> HostNetworks:
    """The senders whose acknowledgments count, as `config` says."""
    if config.resolver_networks is not None:
        return HostNetworks(ipaddress.ip_network(n) for n in config.resolver_networks)
    if config.resolver == "none":
        return HostNetworks(LOOPBACK)
    # A resolver on loopback resolves to it, and loopback then counts (HostNetworks).
    host = urlsplit(config.resolver).hostname or ""
    return HostNetworks(hosts=(host,), what="resolver host (resolver_networks' default)")
