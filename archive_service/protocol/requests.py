"""The Archive's requests as they arrive (Tables 6.9-6.11): urlRequest read into a
`UrlRequest`, an acknowledgment checked; RequestError saying what is wrong."""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import PurePosixPath

from . import ibi as ibimod
from .errors import RequestError
from .verbs import VERBS, Table, Verbs, parse_verblist

ACK_DOMAINS = {"contenttype": ("Data", "Metadata"), "state": ("Original", "Copy")}  # Table 6.11
_URLKEY_RE = re.compile(r"[0-9]{10,}(?:-[0-9]{10,})?")


@dataclass(frozen=True)
class UrlRequest:
    ibi: str
    client_ips: tuple = ()
    filepath: str | None = None
    verbs: Verbs = Verbs()


@lru_cache(maxsize=4096)  # a resolver sends the addresses of its users over and over
def _client_ip(word: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
    return ipaddress.ip_address(word)


def _client_ips(text: str) -> tuple:
    """`IP *(SP IP)`: the user first, then the proxies (Table 6.10)."""
    # Each address kept, not the text: a text of 4 KB is 1,365 addresses (`:: :: …`), and
    # 4,096 such texts kept 370 MB in each worker (issue 30, fourth adversarial pass).
    try:
        return tuple(_client_ip(w) for w in text.split(" "))
    except ValueError:
        raise RequestError(
            "clientinformation.ipaddress must be IP addresses separated by spaces"
        ) from None


def filepath_parts(text: str) -> tuple[str, ...]:
    """A file path inside an item (`/reference.bib`); anything leaving it is an error.

    Table 6.9 asks for a path-absolute, yet Example 7.11 sends `reference.bib`: a path
    without its leading slash is read from the item's root all the same."""
    if "\x00" in text or "\\" in text:
        raise RequestError("parsedibiurl.filepath has a NUL or a backslash")
    parts = tuple(p for p in PurePosixPath("/" + text).parts[1:] if p not in ("", "."))
    if ".." in parts:
        raise RequestError("parsedibiurl.filepath leaves the item")
    return parts


def parse_client(query: dict[str, str]) -> tuple:
    if not query.get("clientinformation.ipaddress"):
        raise RequestError("urlRequest needs clientinformation.ipaddress")
    return _client_ips(query["clientinformation.ipaddress"])


def parse_url_request(query: dict[str, str], table: Table = VERBS) -> UrlRequest:
    client = parse_client(query)
    if not query.get("parsedibiurl.ibi"):
        raise RequestError("urlRequest needs parsedibiurl.ibi")
    try:
        ibimod.parse(query["parsedibiurl.ibi"])
    except ibimod.IbiError:
        raise RequestError("parsedibiurl.ibi is neither a repository name nor an IBIp") from None
    filepath = query.get("parsedibiurl.filepath") or None
    if filepath is not None:
        filepath_parts(filepath)
    return UrlRequest(
        ibi=query["parsedibiurl.ibi"],
        client_ips=client,
        filepath=filepath,
        verbs=parse_verblist(query.get("parsedibiurl.verblist", ""), table),
    )


# Table 6.11 marks every pair but `ibi` obligatory, yet the seed's own Example 6.9 has no
# `state`: the item, contenttype and state counted are the Archive's own anyway.
ACK_REQUIRED = ("clientinformation.ipaddress", "contenttype", "url", "url.persistent", "urlkey")


def check_acknowledgment(query: dict[str, str]) -> None:
    """An acknowledgment the Archive answers: the pairs of ACK_REQUIRED (of which counting
    needs only `url` and `urlkey`), each in its grammar, and `state`, `ibi` when present."""
    for name in ACK_REQUIRED:
        if not query.get(name):
            raise RequestError(f"acknowledgment needs {name}")
    _client_ips(query["clientinformation.ipaddress"])
    if not _URLKEY_RE.fullmatch(query["urlkey"]):
        raise RequestError("urlkey must be digits with an optional dash, 10 or more each")
    for name, allowed in ACK_DOMAINS.items():
        if query.get(name) and query[name] not in allowed:  # empty is as good as absent
            raise RequestError(f"{name} must be {' or '.join(allowed)}")
