"""A licensed item's networks (`access: networks`), asked whether they hold an address.

A depositor's sidecar chooses how many networks an item lists, and every request for a
licensed item from an address not seen before asks whether they hold it: asked of each
network in turn, 4,500 networks cost 6.5 ms a request against 0.3 ms (issue 30, eleventh
pass). The blocks are merged into sorted integer ranges once per list, so the question is a
bisection whatever the list's length.
"""

from __future__ import annotations

import bisect
import ipaddress

Address = ipaddress.IPv4Address | ipaddress.IPv6Address


class Networks(tuple):
    """The networks as given (a tuple of ip_network, in their order: what the index keeps
    and the pages show), with the ranges they cover built on first use."""

    def holds(self, address: Address) -> bool:
        try:
            starts, ends = self._ranges[address.version]
        except AttributeError:
            self._ranges = _ranges(self)
            starts, ends = self._ranges[address.version]
        at = bisect.bisect_right(starts, int(address)) - 1
        return at >= 0 and int(address) <= ends[at]


def _ranges(networks) -> dict[int, tuple[list[int], list[int]]]:
    """Per IP version, the merged ranges the networks cover: starts and ends, sorted."""
    ranges: dict[int, tuple[list[int], list[int]]] = {4: ([], []), 6: ([], [])}
    spans = sorted(
        (net.version, int(net.network_address), int(net.broadcast_address)) for net in networks
    )
    for version, start, end in spans:
        starts, ends = ranges[version]
        if ends and start <= ends[-1] + 1:
            ends[-1] = max(ends[-1], end)
        else:
            starts.append(start)
            ends.append(end)
    return ranges
