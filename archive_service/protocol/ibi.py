"""The two written forms of an IBI and the `{rep … ibip …}` forms of responses.

Repository names follow ID Table 6.1, IBIp ID Table 7.1 (seed 002). Both forms are
case-insensitive: `key()` gives the comparison key used everywhere an IBI is looked up.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime

IBIP_DIGITS = "23456789ABCDEFGHJKLMNPQRSTU"  # base-27 digits, value 0..26 (ID Table 7.6)
IBIP_ALPHABET = IBIP_DIGITS + "WX"  # W and X separate the encoded parts (ID Table 7.1)

_WORD = r"[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?"
_LAST_WORD = r"[A-Za-z](?:[A-Za-z0-9-]*[A-Za-z0-9])?"
_SUBDOMAIN = rf"(?:{_WORD}\.)*{_LAST_WORD}\.?"
_PREFIX_WORD = rf"{_WORD}(?:[.@][0-9]+)?"
_SUFFIX = r"[0-9]{4,}/[0-9]{2}\.[0-9]{2}\.[0-9]{2}\.[0-9]{2}(?:\.[0-9]{2}(?:\.[0-9]+)?)?"

_SUBDOMAIN_RE = re.compile(_SUBDOMAIN)
_PREFIX_WORD_RE = re.compile(_PREFIX_WORD)
_YEAR_RE = re.compile(r"[0-9]{4,}")
_TIME_RE = re.compile(r"[0-9]{2}\.[0-9]{2}\.[0-9]{2}\.[0-9]{2}(?:\.[0-9]{2}(?:\.[0-9]+)?)?")
_SPACE_RE = re.compile(r"\s")
_IBIP_WORD_RE = re.compile(rf"[{IBIP_ALPHABET}{IBIP_ALPHABET.lower()}]+")


class IbiError(ValueError):
    """An IBI that breaks its grammar; the message names the rule and the place."""


_ALNUM = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789")
_DIGITS = frozenset("0123456789")


def _at(text: str, position: int, reason: str) -> str:
    """`reason` located at 1-based `position` of `text` (past the end: 'at the end')."""
    if position > len(text):
        return f"at the end: {reason}"
    return f"character {text[position - 1]!r} at position {position}: {reason}"


def _word_fault(word: str, start: int, last: bool) -> tuple[int, str] | None:
    """Where `word` (at 1-based `start` of its segment) breaks palavra / ultima-palavra."""
    if not word:
        return start, "empty word (two dots in a row, or a leading dot)"
    for i, char in enumerate(word):
        if char not in _ALNUM and char != "-":
            return start + i, "not a letter, digit or '-'"
    if word[0] == "-":
        return start, "a word cannot begin with '-'"
    if word[-1] == "-":
        return start + len(word) - 1, "a word cannot end with '-'"
    if last and word[0] in _DIGITS:
        return start, "the last word of a subdomain must begin with a letter"
    return None


def _subdomain_fault(text: str) -> tuple[int, str] | None:
    words = text.split(".")
    if len(words) > 1 and words[-1] == "":
        words.pop()  # one trailing dot is allowed (a fully qualified name)
    start = 1
    for n, word in enumerate(words):
        fault = _word_fault(word, start, last=n == len(words) - 1)
        if fault:
            return fault
        start += len(word) + 1
    return None


def _prefix_word_fault(text: str) -> tuple[int, str] | None:
    cut = min((i for i, c in enumerate(text) if c in ".@"), default=len(text))
    fault = _word_fault(text[:cut], 1, last=False)
    if fault or cut == len(text):
        return fault
    port = text[cut + 1 :]
    if not port:
        return cut + 2, f"a port (digits) must follow {text[cut]!r}"
    for i, char in enumerate(port):
        if char not in _DIGITS:
            return cut + 2 + i, "the port after '.' or '@' is digits only"
    return None


def _year_detail(text: str) -> str:
    for i, char in enumerate(text):
        if char not in _DIGITS:
            return _detail(text, (i + 1, "not a digit"))
    return f" (it has {len(text)})"


def _time_fault(text: str) -> tuple[int, str] | None:
    names = ("MM", "DD", "hh", "mm", "ss")
    start = 1
    fields = text.split(".")
    for n, value in enumerate(fields):
        if n > 5:
            return start - 1, "nothing may follow the fraction of a second"
        for i, char in enumerate(value):
            if char not in _DIGITS:
                return start + i, "not a digit"
        if n < 5 and len(value) != 2:
            where = start + 2 if len(value) > 2 else start + len(value)
            return where, f"{names[n]} must be 2 digits"
        if n == 5 and not value:
            return start, "the fraction of a second needs 1 or more digits"
        start += len(value) + 1
    if len(fields) < 4:
        return len(text) + 1, f"{names[len(fields)]} is missing"
    return None


def _detail(text: str, fault: tuple[int, str] | None) -> str:
    return f" ({_at(text, *fault)})" if fault else ""


def _first_bad(text: str, allowed: str) -> str:
    for position, char in enumerate(text):
        if char not in allowed:
            return f"character {char!r} at position {position + 1}"
    return "its shape"


def check_rep(text: str) -> str:
    """Validate a repository name (ID Table 6.1 and a real UTC date); return it unchanged."""
    parts = text.split("/")
    if len(parts) != 4:
        raise IbiError(
            f"repository name {text!r} must have 4 segments "
            f"(subdomain/word/year/MM.DD.hh.mm), not {len(parts)}"
        )
    subdomain, word, year, when = parts
    if not _SUBDOMAIN_RE.fullmatch(subdomain):
        raise IbiError(
            f"repository name {text!r}: subdomain {subdomain!r} breaks rule subdominio"
            f" of ID Table 6.1{_detail(subdomain, _subdomain_fault(subdomain))}"
        )
    if not _PREFIX_WORD_RE.fullmatch(word):
        raise IbiError(
            f'repository name {text!r}: {word!r} breaks rule palavra [("." | "@") porta]'
            f" of ID Table 6.1{_detail(word, _prefix_word_fault(word))}"
        )
    if not _YEAR_RE.fullmatch(year):
        raise IbiError(
            f"repository name {text!r}: year {year!r} must be 4 or more digits{_year_detail(year)}"
        )
    if not _TIME_RE.fullmatch(when):
        raise IbiError(
            f"repository name {text!r}: {when!r} must be MM.DD.hh.mm[.ss[.fraction]]"
            f"{_detail(when, _time_fault(when))}"
        )
    fields = [int(x) for x in when.split(".")[:5]]
    month, day, hour, minute = fields[:4]
    second = fields[4] if len(fields) > 4 else 0
    try:
        datetime(int(year), month, day, hour, minute, second)
    except (ValueError, OverflowError) as exc:  # a year of 20 digits overflows a C long
        raise IbiError(f"repository name {text!r}: {when!r} is not a UTC date ({exc})") from None
    return text


def check_ibip(text: str) -> str:
    """Validate an opaque IBI (ID Table 7.1); return it unchanged."""
    parts = text.split("/")
    if len(parts) != 2:
        raise IbiError(f"IBIp {text!r} must be two words separated by '/'")
    allowed = IBIP_ALPHABET + IBIP_ALPHABET.lower()
    for label, part in zip(("prefix", "suffix"), parts):
        if not _IBIP_WORD_RE.fullmatch(part):
            where = "it is empty" if not part else _first_bad(part, allowed)
            raise IbiError(
                f"IBIp {text!r}: {label} {part!r} breaks rule palavra of ID Table 7.1 ({where})"
            )
    return text


@dataclass(frozen=True)
class Ibi:
    """One written IBI: `kind` is 'rep' or 'ibip'; `text` is as written."""

    kind: str
    text: str

    @property
    def key(self) -> str:
        return key(self.text)

    def __str__(self) -> str:
        return self.text


def key(text: str) -> str:
    """The case-insensitive comparison key of an IBI in either form."""
    return text.lower()


def parse(text: str) -> Ibi:
    """Parse either form of an IBI, or raise IbiError saying what is wrong."""
    if not isinstance(text, str) or not text:
        raise IbiError("an IBI must be a non-empty string")
    if _SPACE_RE.search(text):  # the characters str.isspace() knows, at C speed
        raise IbiError(f"IBI {text!r} contains white space")
    segments = text.count("/") + 1
    if segments == 4:
        return Ibi("rep", check_rep(text))
    if segments == 2:
        return Ibi("ibip", check_ibip(text))
    raise IbiError(f"IBI {text!r} has {segments} segments: a repository name has 4, an IBIp 2")


def is_valid(text: str) -> bool:
    try:
        parse(text)
    except IbiError:
        return False
    return True


@dataclass(frozen=True)
class Forms:
    """The forms an IBI is known by: its repository name, its IBIp, or both (§7, Table 7.4)."""

    rep: str | None = None
    ibip: str | None = None

    @classmethod
    def of(cls, ibi: Ibi) -> Forms:
        return cls(rep=ibi.text) if ibi.kind == "rep" else cls(ibip=ibi.text)

    def render(self) -> str:
        words = []
        if self.rep:
            words += ["rep", self.rep]
        if self.ibip:
            words += ["ibip", self.ibip]
        return "{" + " ".join(words) + "}"

    def keys(self) -> list[str]:
        return [key(x) for x in (self.rep, self.ibip) if x]
