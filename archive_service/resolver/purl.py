"""Persistent URLs (§6.1, Table 6.1): `/<ibi><mdf><path>?<query>` into what the resolver asks.

The modifier (Table 6.2) and `ibiurl.verblist` (Tables 6.3-6.5) both become verbs; their union,
modifier first, is `parsedibiurl.verblist` (§6.2, Table 6.6). `ibiurl.requireditemstatus` is
kept by the resolver alone (privacy rule of §6.2); the other query pairs belong to the item
(a web service, for instance) and go on to the URL the user is sent to.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from urllib.parse import parse_qsl, unquote

from ..protocol import ibi as ibimod
from ..protocol.errors import RequestError
from ..protocol.requests import filepath_parts
from ..protocol.verbs import VERBS, Table, Verbs, parse_verblist, split_verbs

# The whole query of `<persistent URL>??` (seed 003's metadata suffix, N2T/ARK's inflection:
# the WSGI query is the second "?") and of `<persistent URL>?info`: the item's metadata.
METADATA_INFLECTIONS = ("?", "info")
IBIURL = "ibiurl."
REQUIRED_STATUS = "ibiurl.requireditemstatus"
VERBLIST = "ibiurl.verblist"


class PurlError(ValueError):
    """A persistent URL that breaks Table 6.1 or 6.3; the message says what and where."""


@dataclass(frozen=True)
class PersistentUrl:
    ibi: str  # parsedibiurl.ibi, as written
    modifier: str  # as written, e.g. "!:(oai_dc)"
    filepath: str | None  # parsedibiurl.filepath: "/reference.bib"; file names as on disk
    verbs: tuple[str, ...]  # parsedibiurl.verblist
    parsed: Verbs  # the relation the verbs name, and GetFileList
    requireditemstatus: str | None  # "Original" or None; never sent to Archives
    passthrough: str = ""  # query pairs for the item itself, as received

    @property
    def verblist(self) -> str:
        return " ".join(self.verbs)


def modifier_verbs(mdf: str, table: Table = VERBS) -> list[str]:
    """The verbs of a modifier (Table 6.5): `!+(pt):` -> GetLastEdition GetTranslation(pt) …"""
    try:
        return table.modifier_words(mdf)
    except ValueError as exc:
        raise PurlError(str(exc)) from None


def split_ibi(path: str, table: Table = VERBS) -> tuple[str, str, str]:
    """Split `<ibi><mdf><path>` (no leading slash) into IBI, modifier and absolute path.

    A repository name has four segments and an IBIp two; the four-segment reading is tried
    first because an IBIp followed by a path can also have four segments, and only a real
    repository name (year and time of ID Table 6.1) passes it.
    """
    errors = []
    for size, kind in ((4, "rep"), (2, "ibip")):
        segments = path.split("/", size)
        if len(segments) < size:
            continue
        last = segments[size - 1]
        cut = next((i for i, c in enumerate(last) if c in table.modifier_start), len(last))
        candidate = "/".join(segments[: size - 1] + [last[:cut]])
        try:
            parsed = ibimod.parse(candidate)
        except ibimod.IbiError as exc:
            errors.append(str(exc))
            continue
        if parsed.kind == kind:
            rest = "/" + segments[size] if len(segments) > size else ""
            return candidate, last[cut:], rest
    if not errors:
        reason = "it has no '/' between the two words of an IBIp"
    else:  # a dotted first segment means a repository name was meant
        reason = errors[0] if "." in path.split("/")[0] else errors[-1]
    raise PurlError(f"the path {'/' + path!r} does not start with an IBI: {reason}")


def _query(query_string: str) -> tuple[dict[str, str], str]:
    """The `ibiurl.*` pairs decoded, and the other pairs untouched (they are the item's)."""
    mine, theirs = [], []
    for part in query_string.split("&") if query_string else []:
        # By the decoded name: `%69biurl.…` is `ibiurl.…` (RFC 3986 §2.3), and was taken for
        # the item's pair, the required Original ignored and passed on to the Archive.
        name = unquote(part.partition("=")[0].replace("+", " "))
        (mine if name.startswith(IBIURL) else theirs).append(part)
    decoded: dict[str, str] = {}
    for name, value in parse_qsl("&".join(mine), keep_blank_values=True):
        if name in decoded:
            raise PurlError(f"query pair {name} is given more than once")
        decoded[name] = value
    return decoded, "&".join(theirs)


# The longest persistent URLs (path and query, characters) remembered: an IBI and a file
# path are some 100, and 512 of 9 KB file paths, each asked once, kept 9.6 MB a worker.
REMEMBERED = 1024


def parsed(path: str, query_string: str = "") -> PersistentUrl:
    """`parse` of the standard's verbs, remembered for the persistent URLs resolved last (a
    few are asked again and again: a tenth of a redirect's CPU went to parsing them). A
    PersistentUrl is frozen; one that is no persistent URL raises each time (not kept)."""
    if len(path) + len(query_string) > REMEMBERED:
        return parse(path, query_string)
    return _kept(path, query_string)


def parse(path: str, query_string: str = "", table: Table = VERBS) -> PersistentUrl:
    """Parse a persistent URL's path (after the resolver's base, no leading slash) and query."""
    if not path:
        raise PurlError("no IBI: a persistent URL is /<ibi><modifier><path>?<query>")
    ibi, mdf, filepath = split_ibi(path, table)
    if query_string in METADATA_INFLECTIONS:  # the metadata, as ":" asks (unless it does)
        query_string, mdf = "", mdf if ":" in mdf else mdf + ":"
    verbs = modifier_verbs(mdf, table)
    if not query_string.isascii():
        raise PurlError("the query has bytes that are not ASCII; percent-encode them")
    ours, passthrough = _query(query_string)
    for name in ours:
        if name not in (REQUIRED_STATUS, VERBLIST):
            raise PurlError(
                f"unknown query pair {name}: Table 6.3 has {VERBLIST} and {REQUIRED_STATUS}"
            )
    status = ours.get(REQUIRED_STATUS)
    if status is not None:
        if status.lower() != "original":
            raise PurlError(f"{REQUIRED_STATUS}={status!r}: the one value is Original")
        status = "Original"
    # Union without repetition, modifier first (§6.2, Example 6.8); a modifier may itself
    # name GetTranslation twice (!+:+), which is kept.
    # A set to look in: `verb not in verbs` made 50,000 distinct verbs take 8 s (quadratic).
    seen = set(verbs)
    # Split as the Archive splits them: by blanks only, a tab or a newline left two verbs one
    # word, which escaped this check (GetLastEdition%09GetLastEdition after "!").
    for verb in split_verbs(ours.get(VERBLIST, "")):
        if verb not in seen:
            seen.add(verb)
            verbs.append(verb)
    try:
        parsed = parse_verblist(" ".join(verbs), table)
    except RequestError as exc:
        raise PurlError(f"verbs {' '.join(verbs)!r}: {exc}") from None
    if filepath in ("", "/"):
        filepath = None
    if filepath is not None:
        try:
            filepath_parts(filepath)
        except RequestError as exc:
            raise PurlError(f"path {filepath!r}: {exc}") from None
    return PersistentUrl(
        ibi=ibi,
        modifier=mdf,
        filepath=filepath,
        verbs=tuple(verbs),
        parsed=parsed,
        requireditemstatus=status,
        passthrough=passthrough,
    )


_kept = lru_cache(maxsize=512)(parse)  # `parsed`'s, of short persistent URLs
