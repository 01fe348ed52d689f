"""FAIR Signposting (signposting.org/FAIR, Levels 1 and 2): the typed links of an item's
landing page, of its files and metadata records, as an HTTP `Link` header (RFC 8288) and as
a linkset (RFC 9264) in `application/linkset` and `application/linkset+json`.

No Flask: the web layer hands each function the URLs (protocol/answers.py `Links`)."""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import quote

from ..citations.work import Work, orcid_url

HEADER_ITEMS = 20  # past this many files the header keeps cite-as, type and linkset only
# Past this many bytes too: nginx holds an answer's status line and headers in
# proxy_buffer_size (4 KB by default) and answers 502 past it; 16 files of ordinary names or
# 40 creators with an ORCID iD made a 4.2 KB header (issue 30, seventh adversarial pass).
HEADER_BYTES = 2048
ABOUT_PAGE = "https://schema.org/AboutPage"
LINKSET = "application/linkset"
LINKSET_JSON = "application/linkset+json"
# What a target keeps as it is: RFC 3986's reserved characters and `%` (an escape already
# made). A dc URL's IRI letters made the header not Latin-1 (serve answered 500), and its `>`
# or `"` closed the target and began links of the metadata's own (issue 30, eighth pass).
URI_CHARACTERS = "!#$%&'()*+,/:;=?@[]~"


@dataclass(frozen=True)
class Link:
    href: str
    rel: str
    type: str | None = None
    anchor: str | None = None  # None: the resource the header is sent with

    def serialized(self, anchor: str | None = None) -> str:
        # Targets in URI form (ours are already: Links percent-encodes), quoted values plain.
        text = f'<{quote(self.href, safe=URI_CHARACTERS)}>; rel="{self.rel}"'
        if anchor:
            text += f'; anchor="{anchor}"'
        return text + (f'; type="{self.type}"' if self.type else "")


def landing_links(
    work: Work, describedby: list[tuple[str, str]], linksets: tuple[str, str]
) -> list[Link]:
    """The landing page's links: cite-as, type, author, license, describedby (url, type)
    per metadata format, item per file, and its two linksets."""
    links = [
        Link(work.cite_as, "cite-as"),
        Link(f"https://schema.org/{work.kind.schema}", "type"),
        Link(ABOUT_PAGE, "type"),
    ]
    for creator in work.creators:
        if creator.url:
            links.append(Link(orcid_url(creator.url) or creator.url, "author"))
    if work.license_url:
        links.append(Link(work.license_url, "license"))
    links += [Link(url, "describedby", mediatype) for url, mediatype in describedby]
    links += [Link(f.url, "item", f.mediatype) for f in work.files]
    links += [Link(linksets[0], "linkset", LINKSET), Link(linksets[1], "linkset", LINKSET_JSON)]
    return links


def member_links(cite_as: str, landing: str) -> list[Link]:
    """What a file under /col/ and a metadata record send: cite-as and collection."""
    return [Link(cite_as, "cite-as"), Link(landing, "collection", "text/html")]


def member_header(cite_as: str, landing: str) -> str:
    return ", ".join(link.serialized() for link in member_links(cite_as, landing))


def header(links: list[Link]) -> str:
    """The Link header of a landing page: all its links, or, past HEADER_ITEMS files or
    HEADER_BYTES (a header that long is cut or refused by proxies), cite-as, type and
    linkset, which leads to the rest."""
    whole = ", ".join(link.serialized() for link in links)
    if len(whole) <= HEADER_BYTES and sum(link.rel == "item" for link in links) <= HEADER_ITEMS:
        return whole
    kept = [link for link in links if link.rel in ("cite-as", "type", "linkset")]
    return ", ".join(link.serialized() for link in kept)


def _contexts(work: Work, links: list[Link]) -> list[tuple[str, list[Link]]]:
    """The linkset's link contexts: the landing page with its links (but the linksets), each
    file and each metadata record with cite-as and collection (Level 2)."""
    own = [link for link in links if link.rel != "linkset"]
    members = dict.fromkeys(link.href for link in links if link.rel in ("item", "describedby"))
    return [(work.landing, own)] + [
        (url, member_links(work.cite_as, work.landing)) for url in members if url != work.landing
    ]


def linkset_text(work: Work, links: list[Link]) -> str:
    """application/linkset (RFC 9264 §4.1): every link with its anchor, one per line."""
    return (
        ",\n".join(
            link.serialized(anchor) for anchor, group in _contexts(work, links) for link in group
        )
        + "\n"
    )


def linkset_json(work: Work, links: list[Link]) -> dict:
    """application/linkset+json (RFC 9264 §4.2): `linkset` alone at the top level, one
    context object per anchor, each relation an array of target objects."""
    contexts = []
    for anchor, group in _contexts(work, links):
        context: dict = {"anchor": anchor}
        for link in group:
            target = {"href": link.href}
            if link.type:
                target["type"] = link.type
            context.setdefault(link.rel, []).append(target)
        contexts.append(context)
    return {"linkset": contexts}
