"""Highwire Press `citation_*` meta tags, as Google Scholar's inclusion guidelines list them."""

from __future__ import annotations

from .work import Work

PDF = "application/pdf"


def highwire(work: Work) -> list[tuple[str, str]]:
    """(name, content) of each `<meta>`, in the guidelines' order."""
    tags = [("citation_title", work.title)]
    tags += [("citation_author", c.name) for c in work.creators]
    if work.date_parts:
        tags.append(("citation_publication_date", "/".join(f"{p:02d}" for p in work.date_parts)))
    pdf = next((f.url for f in work.files if f.mediatype == PDF), None)
    if pdf:
        tags.append(("citation_pdf_url", pdf))
    for name, value in (
        ("citation_language", work.language),
        ("citation_publisher", work.publisher),
    ):
        if value:
            tags.append((name, value))
    tags.append(("citation_abstract_html_url", work.landing))
    return tags
