"""The APA (7th edition) reference a landing page shows under "Cite this".

citeproc-py renders the same reference from the CSL style (styles.py, text/x-bibliography)
but takes 100-300 ms a reference (it searches the style's XML for each macro), where a
landing page has 2 ms: this writer covers what an item's Dublin Core can say, and
tests/test_citations.py holds it to citeproc-py's APA output for each kind it writes alike.
Where it differs on purpose: no creator puts the title first once (citeproc-py repeats it),
no date is `(n.d.)` without citeproc-py's "Retrieved".

The reference is said in the page's language (`language`: the pages' tags, "en" or "pt-BR"):
its words are those of citeproc-py's CSL locale of that language (locales-pt-BR.xml: "julho",
"s.d.", "[Conjunto de dados]"), its months Babel's (CLDR's, the same words); the exported
formats (CSL-JSON, text/x-bibliography …) stay as they are."""

from __future__ import annotations

from babel import Locale
from babel.dates import get_month_names

from .work import Creator, Work

FULL_DATE = {"document", "paper-conference"}  # the kinds whose APA date has month and day
# Each language's words: the bracketed description of a kind, and "no date". pt-BR's are
# citeproc-py's with its pt-BR locale where it gives one; Video, Audio and Thesis (APA 7's
# own, which citeproc-py's APA words otherwise) translated alike.
LABELS = {
    "en": {
        "dataset": "Dataset",
        "software": "Computer software",
        "graphic": "Graphic",
        "motion_picture": "Video",
        "song": "Audio",
        "thesis": "Thesis",
    },
    "pt-BR": {
        "dataset": "Conjunto de dados",
        "software": "Programa de computador",
        "graphic": "Iconográfico",
        "motion_picture": "Vídeo",
        "song": "Áudio",
        "thesis": "Tese",
    },
}
NO_DATE = {"en": "n.d.", "pt-BR": "s.d."}
NO_PUBLISHER = {"article-journal", "paper-conference"}  # APA names their container instead
LISTED = 20  # past this many creators: the first 19, an ellipsis, the last


def apa(work: Work, language: str = "en") -> str:
    """`work`'s APA reference in `language` ("en", "pt-BR"; any other: English)."""
    language = language if language in LABELS else "en"
    kind, labels = work.kind.csl, LABELS[language]
    title = work.title + (f" [{labels[kind]}]" if kind in labels else "")
    when = _date(work, kind, language)
    if work.creators:
        authors = _authors(work.creators)
        authors += "" if authors.endswith(".") else "."  # the author element ends so
        parts = [f"{authors} ({when}). {title}."]
    else:
        parts = [f"{title}. ({when})."]
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


def _date(work: Work, kind: str, language: str) -> str:
    parts = work.date_parts
    if not parts:
        return NO_DATE[language]
    if kind not in FULL_DATE or len(parts) == 1 or not 1 <= parts[1] <= 12:
        return str(parts[0])
    # Babel's, not strftime's: the process's LC_TIME is no page's language.
    month = get_month_names("wide", locale=Locale.parse(language, sep="-"))[parts[1]]
    return f"{parts[0]}, {month}" + (f" {parts[2]}" if len(parts) > 2 else "")
