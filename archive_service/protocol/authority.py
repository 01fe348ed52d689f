"""Naming authority: whether an Archive is the one whose naming subsystem an IBI comes from.

An Archive is trusted to name its own items, nothing more (SPEC §6, "several claims of one
original"). An IBI's naming subsystem is in the IBI itself (ID§6, ID§7): a repository name
begins with the host and word of the subsystem that minted it (`sid.inpe.br/mtc-m19/…`), an
IBIp with the minting host's IP address (Algorithm 5). An Archive covers an IBI when

- the IBI is a repository name whose host and word are those of the Archive's service IBI
  (the port after the word, `@80` or `.8080`, is the server's, not the subsystem's); or
- the IBI is an IBIp whose prefix encodes the Archive's `archiveip`, or the IP address its
  own service IBI encodes when that is an IBIp.
"""

from __future__ import annotations

import ipaddress
import re
from functools import lru_cache

from . import ibi as ibimod
from . import ibip as ibipmod

_PORT = re.compile(r"[.@][0-9]+$")


def _rep_authority(text: str) -> tuple[str, str] | None:
    """(host, word) of a repository name, compared case-insensitively; None for an IBIp."""
    parts = text.split("/")
    if len(parts) != 4:
        return None
    return parts[0].rstrip(".").lower(), _PORT.sub("", parts[1]).lower()


def _ibip_address(text: str) -> str | None:
    """The IP address an IBIp's prefix encodes, None when it is not a well-formed one."""
    if text.count("/") != 1:
        return None
    try:
        return ibipmod.decode_prefix(text.split("/")[0])[0]
    except ibimod.IbiError:
        return None


def _address(text: str | None) -> str | None:
    try:
        return str(ipaddress.ip_address((text or "").strip("[]")))
    except ValueError:
        return None


# The longest IBI whose answer is remembered: one is 20-60 characters, and 4,096 of 8 KB (a
# reader's persistent URLs, each asked once) kept 34 MB a worker (the tenth adversarial pass).
KEPT_IBI = 256


def covers(ibi: str, serviceibi: str, archiveip: str | None = None) -> bool:
    """Whether the Archive of `serviceibi` (announced at `archiveip`) names `ibi`."""
    if len(ibi) > KEPT_IBI:
        return _covers(ibi, serviceibi, archiveip)
    return _kept_covers(ibi, serviceibi, archiveip)


def _covers(ibi: str, serviceibi: str, archiveip: str | None) -> bool:
    if not ibimod.is_valid(ibi):
        return False
    if ibi.count("/") == 3:
        mine = _rep_authority(serviceibi)
        return mine is not None and _rep_authority(ibi) == mine
    minted = _address(_ibip_address(ibi))
    if minted is None:
        return False
    return minted in (_address(archiveip), _address(_ibip_address(serviceibi)))


# Strings in, a bool out: each round settles claims with it for every claimant, and decoding
# an IBIp's prefix was a tenth of a resolution's CPU (issue 35).
_kept_covers = lru_cache(maxsize=4096)(_covers)
