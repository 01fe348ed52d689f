"""CSL-JSON (application/vnd.citationstyles.csl+json), the input of every citation processor
and of formatted references (styles.py)."""

from __future__ import annotations

import re

from .work import Work


def csl_id(work: Work) -> str:
    """A citation key from the IBI (letters, digits, `-`, `_`, `.`, `:`): BibTeX and CSL take it."""
    return re.sub(r"[^A-Za-z0-9_.:-]+", "-", work.ibi).strip("-") or "item"


def csl_json(work: Work) -> dict:
    record: dict = {
        "id": csl_id(work),
        "type": work.kind.csl,
        "title": work.title,
        "URL": work.cite_as,
    }
    if work.creators:
        record["author"] = [_name(c.name, *c.family_given) for c in work.creators]
    if work.date_parts:
        record["issued"] = {"date-parts": [work.date_parts]}
    for key, value in (
        ("abstract", work.description),
        ("publisher", work.publisher),
        ("language", work.language),
    ):
        if value:
            record[key] = value
    return record


def _name(name: str, family: str, given: str) -> dict:
    return {"family": family, "given": given} if given else {"literal": name}
