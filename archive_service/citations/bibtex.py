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


def bibtex(work: Work) -> str:
    fields = [("title", work.title)]
    if work.creators:
        names = [", ".join(p for p in c.family_given if p) for c in work.creators]
        fields.append(("author", " and ".join(names)))
    if work.date_parts:
        fields.append(("year", str(work.date_parts[0])))
        if len(work.date_parts) > 1:
            fields.append(("month", str(work.date_parts[1])))
    for key, value in (
        ("publisher", work.publisher),
        ("language", work.language),
        ("abstract", work.description),
        ("note", f"IBI: {work.ibi}"),
        ("url", work.cite_as),
    ):
        if value:
            fields.append((key, value))
    body = ",\n".join(f"  {key} = {{{escape(value)}}}" for key, value in fields)
    return f"@{work.kind.bibtex}{{{csl_id(work)},\n{body}\n}}\n"
