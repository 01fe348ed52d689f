"""The item.yaml sidecar (SPEC §7, Contract): read, validate, and say precisely what is wrong."""

from __future__ import annotations

import functools
import ipaddress
import os
import re
import socket
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from pathlib import PurePosixPath
from typing import Any
from urllib.parse import urlsplit

import yaml

from ..common import files, netguard
from ..common.yamlsafe import SafeLoader as _SafeLoader
from ..common.yamlsafe import tab_hint
from ..protocol import ibi as ibimod
from ..protocol.language import language_tag
from ..protocol.networks import Networks

_YAML = "tag:yaml.org,2002:"
_SCALARS = {_YAML + t for t in ("null", "bool", "int", "float", "timestamp", "binary")}


class _NotPlain(Exception):
    """A document the plain construction leaves to PyYAML's own (merge keys, recursion …)."""


class _Loader(_SafeLoader):
    """SafeLoader, with documents of plain maps, lists and scalars built by one recursive
    function: PyYAML's general construction (generators, state for recursive objects) was
    half of the time of reading a sidecar. Anything else goes the general way, so the result
    and the errors are SafeLoader's (tests/test_formats.py compares them)."""

    def resolve(self, kind, value, implicit):
        if kind is yaml.ScalarNode and implicit[0]:
            return _plain_scalar_tag(value)
        return super().resolve(kind, value, implicit)

    def construct_document(self, node):
        try:
            return self._plain(node, set())
        except _NotPlain:
            return super().construct_document(node)

    def _plain(self, node, open_nodes: set):
        tag = node.tag
        if isinstance(node, yaml.ScalarNode):
            if tag == _YAML + "str":
                return node.value
            if tag in _SCALARS:
                return self.yaml_constructors[tag](self, node)
            raise _NotPlain
        if id(node) in open_nodes:  # an alias of an enclosing node
            raise _NotPlain
        open_nodes.add(id(node))
        if isinstance(node, yaml.MappingNode) and tag == _YAML + "map":
            result = {}
            for key_node, value_node in node.value:
                key = self._plain(key_node, open_nodes)  # merge keys (<<) are not plain
                try:
                    result[key] = self._plain(value_node, open_nodes)
                except TypeError:  # an unhashable key: SafeLoader says so, with its place
                    raise _NotPlain from None
        elif isinstance(node, yaml.SequenceNode) and tag == _YAML + "seq":
            result = [self._plain(item, open_nodes) for item in node.value]
        else:
            raise _NotPlain
        open_nodes.discard(id(node))
        return result


def _plain_scalar_tag(value: str) -> str:
    """The tag YAML 1.1 gives an untagged plain scalar. It depends on the text alone (the
    loader has no path resolvers), and sidecars repeat most of theirs: keys, states, names.
    Only short ones are cached: 4,096 cached 60 KB values (an abstract) pinned 240 MB."""
    if len(value) > _CACHED_UP_TO:
        return _RESOLVER.resolve(yaml.ScalarNode, value, (True, False))
    return _short_scalar_tag(value)


_CACHED_UP_TO = 200  # characters: keys, states, names, dates; no abstract


@functools.lru_cache(maxsize=4096)
def _short_scalar_tag(value: str) -> str:
    return _RESOLVER.resolve(yaml.ScalarNode, value, (True, False))


_RESOLVER = yaml.resolver.Resolver()

SIDECAR = "item.yaml"
STATES = ("Original", "Copy", "Deleted")
CONTENTTYPES = ("Data", "Metadata")
FORMATS = ("oai_dc",)  # Table 7.5: formato = "oai_dc"
# The fifteen elements of simple Dublin Core, the only ones an oai_dc record may carry.
DC_ELEMENTS = (
    "title",
    "creator",
    "subject",
    "description",
    "publisher",
    "contributor",
    "date",
    "type",
    "format",
    "identifier",
    "source",
    "language",
    "relation",
    "coverage",
    "rights",
)
KEYS = (
    "ibip",
    "rep",
    "state",
    "contenttype",
    "target",
    "language",
    "timestamp",
    "nextedition",
    "translations",
    "metadata",
    "formats",
    "dc",
    "filelist",
    "access",
    "location",
)
# What one sidecar may hold (issue 15). Sidecars are a few key lines and some inline Dublin
# Core (the sample's are under 800 bytes, a rich one with abstracts a few KB): far above that,
# and far below what could hurt a process. libyaml's composer, and _Loader._plain, recurse once
# per level of nesting (100,000 levels overflow the C stack, 1,000 Python's), and aliases
# copied by whoever walks the data grow exponentially (nine levels of nine: 9**9 nodes).
# 64 KiB: ~100 times a rich sidecar; the costliest (22,000 list items) loads in 30 ms, 6 MB
# (1 MiB of them took 0.85 s and 100 MB, per sidecar, in the master on a reload).
MAX_BYTES = 64 * 1024
MAX_DEPTH = 64  # levels of maps and lists, the top map included (SPEC §7 uses 3)
MAX_ALIASES = 100  # `*name` references
MAX_ALIAS_NODES = 10_000  # nodes the aliases stand for, counted as copies
_NOT_NAMES = ("", ".", "..")  # path parts PurePosixPath drops, or doc_path refuses
# Not a Char of XML 1.0 (control characters but TAB, LF and CR; surrogates; U+FFFE, U+FFFF):
# YAML's double-quoted escapes can put any of them in a value.
_NOT_XML = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


class SidecarError(ValueError):
    """A sidecar that cannot be used; `problems` lists each fault, key by key."""

    def __init__(self, path: str, problems: list[str]):
        self.path = path
        self.problems = problems
        super().__init__(f"{path}: " + "; ".join(problems))


@dataclass
class Sidecar:
    ibip: str | None = None
    rep: str | None = None
    state: str = "Original"
    contenttype: str = "Data"
    target: str | None = None
    language: str | None = None
    timestamp: datetime | None = None
    nextedition: ibimod.Ibi | None = None
    translations: dict[str, ibimod.Ibi] = field(default_factory=dict)
    metadata: ibimod.Ibi | None = None
    formats: dict[str, str] = field(default_factory=dict)
    dc: dict[str, list[str]] | None = None
    filelist_public: bool = True
    networks: tuple = ()
    location: str | None = None
    unknown_keys: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)  # usable, but `check` should say so


def normalize_language(text: str) -> str:
    """`lang[-CC]` in any case, as the standard writes it (protocol/language.py)."""
    return language_tag(text, any_case=True)


def parse_timestamp(value: Any) -> datetime:
    """ISO 8601 text (or a YAML timestamp) as an aware UTC datetime; naive means UTC."""
    if isinstance(value, datetime):
        moment = value
    elif isinstance(value, date):
        moment = datetime(value.year, value.month, value.day)
    elif isinstance(value, str):
        moment = datetime.fromisoformat(value.strip())
    else:
        raise ValueError(f"{value!r} is not an ISO 8601 date and time")
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    try:
        return moment.astimezone(UTC)
    except OverflowError:  # 0001-01-01T00:00:00+23:59 is before year 1 in UTC
        raise ValueError(f"{value!r} is out of range once in UTC") from None


def doc_path(value: Any) -> str:
    """A relative path under doc/, with no way out of it."""
    if not isinstance(value, str) or not value.strip():
        raise ValueError("must be a file name under doc/")
    if "\\" in value or "\x00" in value:
        raise ValueError(f"{value!r} has a backslash or NUL")
    if value[0] != "/" and all(part not in _NOT_NAMES for part in value.split("/")):
        return value  # already what PurePosixPath would make of it (a first build's common case)
    path = PurePosixPath(value)
    if path.is_absolute() or ".." in path.parts:
        raise ValueError(f"{value!r} must stay under doc/ (no leading '/', no '..')")
    return str(path)


def _ibi(value: Any) -> ibimod.Ibi:
    if not isinstance(value, str):
        raise ValueError(f"{value!r} is not an IBI")
    return ibimod.parse(value.strip())


def _text_list(value: Any) -> list[str]:
    values = value if isinstance(value, list) else [value]
    if not all(isinstance(v, (str, int, float, date)) for v in values):
        raise ValueError("each value must be text or a list of text")
    return [str(v) for v in values]


def xml_text(text: str) -> str:
    """`text` with U+FFFD for each character an XML 1.0 document cannot hold."""
    return _NOT_XML.sub("\ufffd", text)


def _dc_warnings(dc: dict[str, list[str]]) -> list[str]:
    found = []
    for element, values in dc.items():
        for value in values:
            if (bad := _NOT_XML.search(value)) is not None:
                found.append(
                    f"dc: {element} holds U+{ord(bad.group()):04X}, which XML 1.0 "
                    "does not allow (oai_dc shows U+FFFD in its place)"
                )
                break
    return found


# Longer than any landing page URL seen in DSpace, EPrints or Dataverse; well within a
# pairs line and a log line.
MAX_LOCATION = 2048


# How an internal location's warning ends: `check` leaves it out under allow_internal, the
# admin's word that readers reach such addresses (an intranet Archive).
INTERNAL_LOCATION = ": a reader sent there reaches their own network"


def internal_host(url: str) -> str | None:
    """What is internal about `url`'s host when it says so itself, with no look-up: an IP
    address netguard judges internal (in any spelling the URL parser and inet_aton read:
    127.1, 0x7f.1, 2130706433) or localhost. Such a location is answered to readers as any
    other (an intranet Archive may mean it), but `check` names it unless allow_internal
    (issue 30, §9)."""
    host = (urlsplit(url).hostname or "").rstrip(".")
    if host == "localhost" or host.endswith(".localhost"):
        return f"{host} is this host (loopback)"
    try:
        address = host if ":" in host else socket.inet_ntoa(socket.inet_aton(host))
    except OSError:
        return None  # a name: what it resolves to is check --links' to say
    reason = netguard.kind(address)
    return None if reason is None or reason == "not an IP address" else f"{host} is {reason}"


def location_url(value: Any) -> str:
    """An absolute http(s) URL where the item's content lives (issue 21): the Archive answers
    it as the item's `url` (CriarParURL lets the Archive choose the access URL)."""
    if not isinstance(value, str):
        raise ValueError(f"{value!r} is not a URL")
    text = value.strip()
    if len(text) > MAX_LOCATION:
        raise ValueError(f"longer than {MAX_LOCATION} characters")
    if not text.isascii() or any(c.isspace() or not c.isprintable() for c in text):
        raise ValueError(
            f"{text!r} holds a blank, a control or a non-ASCII character (percent-encode it)"
        )
    try:
        parts = urlsplit(text)
        parts.port  # noqa: B018 (raises on a port that is not a number in range)
    except ValueError as exc:
        raise ValueError(f"{text!r} is not a URL ({exc})") from None
    if parts.scheme.lower() not in ("http", "https"):
        raise ValueError(f"{text!r} is not an http:// or https:// URL")
    if not parts.hostname:
        raise ValueError(f"{text!r} names no host")
    if parts.username is not None or parts.password is not None:
        raise ValueError(f"{text!r} holds a user name or password; a location is public")
    # The answer's `url` value must be a word of Table 4.2, which has no "{" or "}" (a raw
    # brace made the body no list of pairs); RFC 3986 has them percent-encoded anyway.
    return text.replace("{", "%7B").replace("}", "%7D")


def _networks(value: Any) -> tuple:
    if not isinstance(value, dict) or set(value) != {"networks"}:
        raise ValueError("must be a map with one key, networks: [CIDR, ...]")
    nets = value["networks"]
    if not isinstance(nets, list) or not nets:
        raise ValueError("networks must be a non-empty list of CIDR blocks")
    return Networks(ipaddress.ip_network(str(n), strict=False) for n in nets)


def _string_map(value: Any, what: str) -> dict:
    if not isinstance(value, dict):
        raise ValueError(f"must be a map of {what}")
    return value


def _choice(options: tuple[str, ...]):
    def convert(value):
        if value not in options:
            raise ValueError(f"{value!r} is not one of {', '.join(options)}")
        return value

    return convert


_FORMAT = _choice(FORMATS)
_DC_ELEMENT = _choice(DC_ELEMENTS)
_FILELIST = _choice(("public", "private"))

# (key, Sidecar attribute, conversion), in the order faults are listed. Built once: closures
# made per sidecar were a sixth of a first build's time.
_FIELDS = (
    ("ibip", "ibip", lambda v: ibimod.check_ibip(str(v).strip())),
    ("rep", "rep", lambda v: ibimod.check_rep(str(v).strip())),
    ("state", "state", _choice(STATES)),
    ("contenttype", "contenttype", _choice(CONTENTTYPES)),
    ("target", "target", doc_path),
    ("language", "language", lambda v: normalize_language(str(v))),
    ("timestamp", "timestamp", parse_timestamp),
    ("nextedition", "nextedition", _ibi),
    ("metadata", "metadata", _ibi),
    (
        "translations",
        "translations",
        lambda v: {
            normalize_language(str(lang)): _ibi(ref)
            for lang, ref in _string_map(v, "lang: IBI").items()
        },
    ),
    (
        "formats",
        "formats",
        lambda v: {
            str(_FORMAT(fmt)): doc_path(path)
            for fmt, path in _string_map(v, "format: file under doc/").items()
        },
    ),
    (
        "dc",
        "dc",
        lambda v: {
            str(_DC_ELEMENT(element)): _text_list(values)
            for element, values in _string_map(v, "Dublin Core elements").items()
        },
    ),
    ("filelist", "filelist_public", lambda v: _FILELIST(v) == "public"),
    ("access", "networks", _networks),
    ("location", "location", location_url),
)
_KNOWN = frozenset(KEYS)


def parse(data: Any, where: str = SIDECAR) -> Sidecar:
    """Validate the loaded YAML of one sidecar; raise SidecarError listing every fault."""
    if data is None:
        return Sidecar()
    if not isinstance(data, dict):
        raise SidecarError(where, ["the sidecar must be a YAML map of keys (see SPEC §7)"])
    sidecar = Sidecar()
    problems: list[str] = []
    for key, attr, convert in _FIELDS:
        if key in data:
            try:
                setattr(sidecar, attr, convert(data[key]))
            except (ValueError, TypeError) as exc:
                problems.append(f"{key}: {exc}")
    sidecar.unknown_keys = sorted(str(k) for k in data if k not in _KNOWN)
    if sidecar.dc:
        sidecar.warnings = _dc_warnings(sidecar.dc)
    if sidecar.location and (inside := internal_host(sidecar.location)):
        sidecar.warnings.append(f"location: {inside}{INTERNAL_LOCATION}")
    if problems:
        raise SidecarError(where, problems)
    return sidecar


def bounds_problem(text: bytes) -> str | None:
    """Which of the bounds above the YAML `text` breaks, or None; found before anything
    recurses: libyaml's parser keeps its own stack, so its events are safe to count."""
    if len(text) > MAX_BYTES:
        return f"larger than {MAX_BYTES} bytes (the most a sidecar may hold)"
    # Each map or list needs an indicator of its own ('-', '?', ':', '[' or '{'), so their
    # count bounds the depth; aliases need an anchor ('&') and a '*'. A sidecar with few
    # indicators and no anchors, the usual one, is done here (in under a microsecond, where
    # counting its events takes 2/3 of the time of loading it).
    indicators = sum(text.count(c) for c in (b"-", b":", b"[", b"{", b"?"))
    if indicators <= MAX_DEPTH and not (b"&" in text and b"*" in text):
        return None
    depth = aliases = copied = 0
    anchored: dict[str, int] = {}  # anchor -> nodes under it, aliases counted as copies
    open_nodes: list[list] = []  # [anchor, nodes so far] of each enclosing map or list
    try:
        for event in yaml.parse(text, Loader=_SafeLoader):
            nodes = 0
            if isinstance(event, yaml.CollectionStartEvent):
                depth += 1
                if depth > MAX_DEPTH:
                    return _TOO_DEEP
                open_nodes.append([event.anchor, 1])
            elif isinstance(event, yaml.CollectionEndEvent):
                depth -= 1
                anchor, nodes = open_nodes.pop()
                if anchor is not None:
                    anchored[anchor] = nodes
            elif isinstance(event, yaml.ScalarEvent):
                nodes = 1
                if event.anchor is not None:
                    anchored[event.anchor] = 1
            elif isinstance(event, yaml.AliasEvent):
                aliases += 1
                if aliases > MAX_ALIASES:
                    return f"more than {MAX_ALIASES} aliases (the most a sidecar may use)"
                nodes = anchored.get(event.anchor, 1)
                copied += nodes
                if copied > MAX_ALIAS_NODES:
                    return (
                        f"aliases expand to more than {MAX_ALIAS_NODES} nodes (the most a "
                        "sidecar's aliases may stand for)"
                    )
            if nodes and open_nodes:
                open_nodes[-1][1] += nodes
    except yaml.YAMLError as exc:
        # libyaml 0.2.6 (PyYAML 6.0.4's wheels) refuses flow nesting past 1,000 levels while
        # its scanner looks ahead, before the parser hands over the event past MAX_DEPTH.
        if "maximum nesting depth" in str(getattr(exc, "problem", "")):
            return _TOO_DEEP
        # Otherwise the loader reports it, with its place (all before it was within bounds).
    return None


_TOO_DEEP = f"nested deeper than {MAX_DEPTH} levels (the most a sidecar may nest)"


def read(path: str | os.PathLike) -> Sidecar:
    """Load and validate `path`; a YAML syntax error is a SidecarError naming line and column,
    a sidecar beyond the bounds above one naming the bound."""
    try:
        with open(files.open_regular(path), "rb") as stream:
            text = stream.read(MAX_BYTES + 1)
        problem = bounds_problem(text)
        if problem is not None:
            raise SidecarError(str(path), [problem])
        data = yaml.load(text, Loader=_Loader)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise SidecarError(
            str(path), [f"YAML syntax error{where}: {exc.problem}{tab_hint(text, mark)}"]
        ) from None
    except yaml.YAMLError as exc:
        raise SidecarError(str(path), [f"YAML error: {exc}"]) from None
    except OSError as exc:
        raise SidecarError(str(path), [f"cannot read: {exc.strerror}"]) from None
    return parse(data, str(path))
