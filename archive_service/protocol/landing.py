"""An item's landing page on the Archive that holds it (issue 32): its URL, and the formats
of the item's description it answers by content negotiation (`Accept`).

Both sides read this: the Archive's landing route, and the resolver, which sends a request
naming one of these formats to the landing page of the Archive that answered for the IBI."""

from __future__ import annotations

FORMATS = (
    "application/ld+json",
    "application/vnd.citationstyles.csl+json",
    "application/x-bibtex",
    "application/x-research-info-systems",
    "text/x-bibliography",
    "application/xml",  # oai_dc
    "text/xml",
)


def landing_url(archiveaddress: str, archiveserviceibi: str, ibi: str) -> str:
    """`http://<archiveaddress>/<archiveserviceibi>/item/<ibi>`."""
    return f"http://{archiveaddress}/{archiveserviceibi}/item/{ibi}"


def wants_description(accept: list[tuple[str, float]]) -> bool:
    """Whether an Accept header's (media range, q) pairs name one of FORMATS (not through a
    wildcard) at least as much as they accept HTML: a browser's `*/*` never does."""
    named = max((q for value, q in accept if value.lower() in FORMATS), default=0)
    html = max(
        (q for value, q in accept if value.lower() in ("text/html", "text/*", "*/*")), default=0
    )
    return named > 0 and named >= html
