"""The list-of-pairs format of every response (§4.2, Table 4.2) and request query strings.

Contract (SPEC §3): one pair per line, CRLF between lines, pairs sorted by name, no leading or
trailing white space, ASCII only; an empty list is an empty body.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import lru_cache
from urllib.parse import quote, unquote

CRLF = "\r\n"
TEXT = "text/plain; charset=us-ascii"  # a pairs body's media type (SPEC §3)

# caractere = %x21-7A | %x7C | %x7E (Table 4.2): printable ASCII less "{" and "}".
_WORD_CHARS = "".join(chr(c) for c in range(0x21, 0x7B)) + "|~"
_WORD_RE = re.compile(r"[\x21-\x7a|~]+")
# A value is a word or "{" word *(SP word) "}" or the empty value "{}".
_PAIR_RE = re.compile(
    r"([\x21-\x7a|~]+) +(\{(?:[\x21-\x7a|~]+(?: [\x21-\x7a|~]+)*)?\}|[\x21-\x7a|~]+)"
)
_SPACE_RE = re.compile(r"(?: |\r\n)+")


class PairsError(ValueError):
    """A body that is not a list of pairs, or a query string that breaks §4.1."""


def word(text: str) -> str:
    """Make `text` a word: bytes outside the word characters (and "%") become %xx.

    Strings that came from the file system carry undecodable bytes as surrogates
    (os.fsdecode); those are written back as the original bytes.
    """
    raw = text.encode("utf-8", "surrogateescape")
    return quote(raw, safe=_WORD_CHARS.replace("%", ""))


def value_list(words: Iterable[str]) -> str:
    """A braced value: `{a b c}`; `{}` when there are no words."""
    return "{" + " ".join(words) + "}"


def render(pairs: Iterable[tuple[str, str]]) -> str:
    """Render (name, value) pairs per the contract; values must already be words or braces."""
    lines = []
    for name, value in sorted(pairs, key=lambda p: p[0]):
        if not _WORD_RE.fullmatch(name):
            raise PairsError(f"pair name {name!r} is not a word")
        lines.append(f"{name} {value}")
    body = CRLF.join(lines)
    if not body.isascii():
        raise PairsError("a response must be ASCII")
    return body


def parse(body: str, most: int | None = None) -> list[tuple[str, str]]:
    """Parse a list of pairs under the Table 4.2 grammar; raise PairsError if it breaks it,
    or if it has more than `most` pairs (a peer's answer: each pair costs CPU)."""
    if body == "":
        return []
    if not body.isascii():
        raise PairsError("a list of pairs must be ASCII")
    pairs: list[tuple[str, str]] = []
    position = 0
    while True:
        match = _PAIR_RE.match(body, position)
        if not match:
            raise PairsError(
                f"no pair at character {position + 1}: {body[position : position + 40]!r}"
            )
        pairs.append((match.group(1), match.group(2)))
        if most is not None and len(pairs) > most:
            raise PairsError(f"more than {most} pairs")
        position = match.end()
        if position == len(body):
            return pairs
        space = _SPACE_RE.match(body, position)
        if not space or space.end() == len(body):
            raise PairsError(f"expected a space between pairs at character {position + 1}")
        position = space.end()


def unbrace(value: str) -> list[str]:
    """The words of a value: `{a b}` -> ['a', 'b'], `w` -> ['w'], `{}` -> []."""
    if value.startswith("{"):
        return value[1:-1].split()
    return [value]


def _decode(part: str) -> str:
    return unquote(part.replace("+", " "), "utf-8", "surrogateescape")


_decode_kept = lru_cache(maxsize=1024)(_decode)


def _decoded(part: str) -> str:
    # The escaped parts of a resolver's requests repeat (the IBI, the verbs; the client's
    # address has no escape): decoded once per worker, a urlRequest's query takes 1 us
    # instead of 4. Long parts are decoded each time, so the cache holds at most ~0.5 MB.
    return _decode_kept(part) if len(part) <= 256 else _decode(part)


def parse_query(query_string: str) -> dict[str, str]:
    """Decode a request's query string (§4.1) into a dict.

    Values are ASCII with %xx escapes; escaped bytes that are not UTF-8 are kept as
    surrogates (the os.fsdecode convention), so a Latin-1 file name reaches the disk as the
    same bytes. A name given twice, or raw non-ASCII, is an error: the message says which.
    """
    if not query_string.isascii():
        raise PairsError("the query string has bytes that are not ASCII; percent-encode them")
    result: dict[str, str] = {}
    # parse_qsl's own splitting, with unquote called only on the parts that hold an escape
    # or a "+": a third of decoding a urlRequest's query (tests/test_pairs_query.py holds
    # it to parse_qsl's result).
    for piece in query_string.split("&"):
        if not piece:
            continue
        name, _, value = piece.partition("=")
        if "+" in name or "%" in name:
            name = _decoded(name)
        if "+" in value or "%" in value:
            value = _decoded(value)
        if name in result:
            raise PairsError(f"parameter {name} is given more than once")
        result[name] = value
    return result
