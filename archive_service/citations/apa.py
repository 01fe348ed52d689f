"""The APA (7th edition) reference a landing page shows under "Cite this".

citeproc-py renders the same reference from the CSL style (styles.py, text/x-bibliography)
but takes 100-300 ms a reference (it searches the style's XML for each macro), where a
landing page has 2 ms: this writer covers what an item's Dublin Core can say, and
tests/test_citations.py holds it to citeproc-py's APA output for each kind it writes alike.
Where it differs on purpose: no creator puts the title first once (citeproc-py repeats it),
no date is `(n.d.)` without citeproc-py's "Retrieved"."""

from __future__ import annotations

from datetime import date

from .work import Creator, Work

FULL_DATE = {"document", "paper-conference"}  # the kinds whose APA date has month and day
LABELS = {
    "dataset": "Dataset",
    "software": "Computer software",
    "graphic": "Graphic",
    "motion_picture": "Video",
    "song": "Audio",
    "thesis": "Thesis",
}
NO_PUBLISHER = {"article-journal", "paper-conference"}  # APA names their container instead
LISTED = 20  # past this many creators: the first 19, an ellipsis, the last


def apa(work: Work) -> str:
    kind = work.kind.csl
    title = work.title + (f" [{LABELS[kind]}]" if kind in LABELS else "")
    if work.creators:
        authors = _authors(work.creators)
        authors += "" if authors.endswith(".") else "."  # the author element ends so
        parts = [f"{authors} ({_date(work, kind)}). {title}."]
    else:
        parts = [f"{title}. ({_date(work, kind)})."]
    if work.publisher and kind not in NO_PUBLISHER:
        parts.append(f"{work.publisher}.")
    parts.append(work.cite_as)
    return " ".join(parts)


def _authors(creators: tuple[Creator, ...]) -> str:
    names = [_name(c) for c in creators]
    if len(names) > LISTED:
        return ", ".join(names[: LISTED - 1]) + ", … " + names[-1]
    if len(names) == 1:
        return names[0]
    return ", ".join(names[:-1]) + ", & " + names[-1]


def _name(creator: Creator) -> str:
    family, given = creator.family_given
    if not given:
        return family
    initials = " ".join(
        "-".join(f"{part[0]}." for part in word.split("-") if part) for word in given.split()
    )
    return f"{family}, {initials}"


def _date(work: Work, kind: str) -> str:
    parts = work.date_parts
    if not parts:
        return "n.d."
    if kind not in FULL_DATE or len(parts) == 1:
        return str(parts[0])
    month = date(2000, parts[1], 1).strftime("%B") if 1 <= parts[1] <= 12 else ""
    if not month:
        return str(parts[0])
    return f"{parts[0]}, {month}" + (f" {parts[2]}" if len(parts) > 2 else "")
