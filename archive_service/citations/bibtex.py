"""BibTeX (application/x-bibtex): one entry, UTF-8, every value braced with BibTeX's special
characters escaped (checked with bibtexparser in tests/test_citations.py)."""

from __future__ import annotations

import re

from .csl import csl_id
from .work import Work

_SPECIAL = re.compile(r"([\\{}%&$#_^~])")
_REPLACEMENT = {"\\": r"\textbackslash{}", "^": r"\^{}", "~": r"\~{}"}


def escape(text: str) -> str:
    """`text` as a braced BibTeX value shows it: specials escaped, spaces single."""
    text = " ".join(text.split())
    return _SPECIAL.sub(lambda m: _REPLACEMENT.get(m[1], "\\" + m[1]), text)


# BibTeX splits an author list at the word `and` (any case) outside braces: a name part
# holding it as a word is braced, or "Doe and Roe, John" was two authors, Doe and "Roe, John".
_AND = re.compile(r"(?:^|\s)and(?:\s|$)", re.IGNORECASE)


def _name_part(text: str) -> str:
    escaped = escape(text)
    return f"{{{escaped}}}" if _AND.search(text) else escaped


def bibtex(work: Work) -> str:
    fields = [("title", work.title, True)]
    if work.creators:
        # A name without a given part (an organization) braced: BibTeX splits no words of it.
        names = [
            f"{_name_part(c.family_given[0])}, {_name_part(c.family_given[1])}"
            if c.family_given[1]
            else f"{{{escape(c.name)}}}"
            for c in work.creators
        ]
        fields.append(("author", " and ".join(names), False))
    if work.date_parts:
        fields.append(("year", str(work.date_parts[0]), True))
        if len(work.date_parts) > 1:
            fields.append(("month", str(work.date_parts[1]), True))
    for key, value in (
        ("publisher", work.publisher),
        ("language", work.language),
        ("abstract", work.description),
        ("note", f"IBI: {work.ibi}"),
        ("url", work.cite_as),
    ):
        if value:
            fields.append((key, value, True))
    body = ",\n".join(
        f"  {key} = {{{escape(value) if plain else value}}}" for key, value, plain in fields
    )
    return f"@{work.kind.bibtex}{{{csl_id(work)},\n{body}\n}}\n"
