"""RIS (application/x-research-info-systems), written by rispy, the RIS library Zotero's
and others' tests read with."""

from __future__ import annotations

import rispy

from .work import Work


def _line(text: str) -> str:
    # One RIS line: a line break in a title or a name (a sidecar's, a harvested record's)
    # began a line of its own, `ER  -` and a new record a reference manager imported.
    return " ".join(text.split())


class _Writer(rispy.RisWriter):
    def set_header(self, count: int) -> str:
        return ""  # no `1.` line before TY: a reference manager's import takes plain RIS


def ris(work: Work) -> str:
    entry: dict = {
        "type_of_reference": work.kind.ris,
        "title": _line(work.title),
        "urls": [work.cite_as],
    }
    if work.creators:
        entry["authors"] = [_line(", ".join(p for p in c.family_given if p)) for c in work.creators]
    if work.date_parts:
        entry["year"] = str(work.date_parts[0])
        entry["date"] = "/".join(f"{p:02d}" for p in work.date_parts)
    for key, value in (
        ("abstract", work.description),
        ("publisher", work.publisher),
        ("language", work.language),
    ):
        if value:
            entry[key] = _line(value)
    entry["notes"] = [f"IBI: {work.ibi}"]
    return rispy.dumps([entry], implementation=_Writer)
