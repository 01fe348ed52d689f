"""Item landing pages (issue 32, SPEC §8): `/<archiveserviceibi>/item/<ibi>` with its
citation, FAIR Signposting (signposting.py) and content negotiation; a Deleted item's is a
410 tombstone. Linksets at `/<archiveserviceibi>/linkset[.json]/<ibi>`.

A Blueprint made per app by `blueprint(...)` from what create_app hands it."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass

from flask import Blueprint, Response, abort, redirect, render_template, request

from ..citations import apa, bibtex, csl, highwire, jsonld, ris, styles
from ..citations.work import File, Work, work_of
from ..collection import items as collection
from ..common.i18n import human_size, tag, when
from ..common.net import persistent_url
from ..http_errors import error_response
from ..oai.records import oai_dc_xml
from ..protocol.answers import Links
from ..protocol.catalog import Item, follow_editions, listed_translations
from ..stores.stats import counter
from . import headers, signposting
from .download import displayable

HTML = "text/html; charset=utf-8"
# What the landing page URL gives (`?format=` names one; Accept chooses among the types).
FORMATS: dict[str, tuple[str, ...]] = {
    "html": ("text/html", "application/xhtml+xml"),
    "jsonld": ("application/ld+json",),
    "csl": ("application/vnd.citationstyles.csl+json",),
    "bibtex": ("application/x-bibtex",),
    "ris": ("application/x-research-info-systems",),
    "bibliography": ("text/x-bibliography",),
    "oai_dc": ("application/xml", "text/xml"),
}
# Files a landing page lists, at most; past them it links the file list. Every file was a
# row of the page and of its JSON-LD: 20,000 files made a view 2.3-2.8 s and 9 MB, where an
# item's page takes 5 ms (issue 30, seventh adversarial pass).
PAGE_FILES = 100
# The files each format lists (None: all; absent: none). The others walked doc/ for nothing:
# 0.8-1.3 s a BibTeX, RIS, CSL-JSON, reference or oai_dc of an item of 20,000 files, where
# another item's takes 1.4-4.8 ms (issue 30, eighth adversarial pass).
FILES_LISTED: dict[str, int | None] = {"html": PAGE_FILES, "jsonld": None}
BY_TYPE = {mediatype: name for name, types in FORMATS.items() for mediatype in types}
NOT_ACCEPTABLE = "none of the Accept types can be given; offered: " + ", ".join(
    types[0] for types in FORMATS.values()
)


# The copy button's script, the one script of the pages: kept here so that the pages' Content
# Security Policy can allow exactly it, by its hash (web/headers.py), and no other.
COPY_SCRIPT = """
(function () {
  var button = document.getElementById("copy"), field = document.getElementById("purl");
  if (!navigator.clipboard) return;
  button.hidden = false;
  button.addEventListener("click", function () {
    navigator.clipboard.writeText(field.value).then(function () {
      document.getElementById("copied").textContent = button.dataset.done;
    });
  });
})();
"""


@dataclass(frozen=True)
class Context:
    """What the pages need of the app create_app made."""

    catalog: object  # index.catalog.StoreCatalog
    resolver: str
    links: Callable[[dict], Links]
    used: Callable[[Item, str], None]
    licensed: Callable[[Item], bool]


def blueprint(site: Context) -> Blueprint:
    pages = Blueprint("landing", __name__)

    def found(ibi: str) -> Item | Response:
        item = site.catalog.lookup(ibi)
        if item is None:
            abort(404)
        if ibi != item.name.text:  # the other form, or another case: one URL per item
            return redirect(site.links(request.environ).landing(item), 301)
        return item

    @pages.get("/item/<path:ibi>", endpoint="item")
    def landing(ibi: str) -> Response:
        item = found(ibi)
        if isinstance(item, Response):
            return item
        wanted = chosen_format(item)
        if wanted is None:
            return with_vary(error_response(NOT_ACCEPTABLE, 406))
        links = site.links(request.environ)
        work, file_count = work_for(site, item, links, FILES_LISTED.get(wanted, 0))
        status = 410 if item.state == "Deleted" else 200
        if wanted != "html":
            response = exported(item, work, wanted)
            response.status_code = status if response.status_code == 200 else response.status_code
            response.headers["Link"] = signposting.member_header(work.cite_as, work.landing)
            return with_vary(response)
        more_files = links.filelist(item) if file_count > PAGE_FILES else None
        described = describedby(site, item, links)
        signposts = signposting.landing_links(
            work, described, (links.linkset(item), links.linkset(item, json=True))
        )
        page = render_template(
            "landing.html",
            copy_script=COPY_SCRIPT,
            more_files=more_files,
            file_count=file_count,
            **page_facts(site, item, work, links, described),
        )
        if status == 200:
            site.used(item, counter.INVESTIGATION)
        response = Response(page, status=status, content_type=HTML)
        response.headers["Link"] = signposting.header(signposts)
        return with_vary(response)

    def linkset(ibi: str, as_json: bool) -> Response:
        item = found(ibi)
        if isinstance(item, Response):
            return item
        links = site.links(request.environ)
        work, _count = work_for(site, item, links)
        signposts = signposting.landing_links(
            work,
            describedby(site, item, links),
            (links.linkset(item), links.linkset(item, json=True)),
        )
        if as_json:
            body = json.dumps(signposting.linkset_json(work, signposts), indent=1) + "\n"
            return Response(body, content_type=signposting.LINKSET_JSON)
        return Response(signposting.linkset_text(work, signposts), content_type=signposting.LINKSET)

    pages.add_url_rule("/linkset/<path:ibi>", "linkset", lambda ibi: linkset(ibi, False))
    pages.add_url_rule("/linkset.json/<path:ibi>", "linkset_json", lambda ibi: linkset(ibi, True))

    return pages


def chosen_format(item: Item) -> str | None:
    offered = [t for name, types in FORMATS.items() if name != "oai_dc" or item.dc for t in types]
    asked = request.args.get("format")
    if asked:
        return asked if asked in FORMATS and (asked != "oai_dc" or item.dc) else None
    if not request.accept_mimetypes:
        return "html"
    best = request.accept_mimetypes.best_match(offered)
    return BY_TYPE[best] if best else None


def work_for(
    site: Context, item: Item, links: Links, at_most: int | None = None
) -> tuple[Work, int]:
    """The item's `Work` with its first `at_most` files (None: all), and how many it has."""
    landing_url = links.landing(item)
    cite_as = persistent_url(site.resolver, item.name.text) or landing_url
    files, count = files_of(site, item, links, at_most)
    return work_of(item, cite_as, landing_url, files), count


def files_of(
    site: Context, item: Item, links: Links, at_most: int | None = None
) -> tuple[tuple[File, ...], int]:
    """The item's files as `File`s, the first `at_most` of them (None: all), and how many
    there are (0 when none were asked for: `at_most=0` lists nothing)."""
    if item.state == "Deleted" or not item.filelist_public or at_most == 0:
        return (), 0
    listed = collection.list_files(site.catalog.root, item)
    files = tuple(
        File(links.file(item, rel), displayable(rel), mediatype_of(rel), size)
        for rel, size in listed[:at_most]
    )
    return files, len(listed)


def describedby(site: Context, item: Item, links: Links) -> list[tuple[str, str]]:
    """(url, media type) of each metadata record of the item: its negotiated formats,
    its inline Dublin Core as oai_dc, the files of its metadata item."""
    landing_url = links.landing(item)
    found = [
        (f"{landing_url}?format={name}", types[0])
        for name, types in FORMATS.items()
        if name not in ("html", "bibliography", "oai_dc")
    ]
    if item.dc:
        found.append((links.metadata(item, "oai_dc"), "application/xml"))
    meta = site.catalog.lookup(item.metadata) if item.metadata else None
    if meta is not None and meta.state != "Deleted":
        found += [(links.file(meta, rel), mediatype_of(rel)) for rel in meta.formats.values()]
    return found


def exported(item: Item, work: Work, wanted: str) -> Response:
    if wanted == "jsonld":
        return Response(
            json.dumps(jsonld.jsonld(work), indent=1), content_type="application/ld+json"
        )
    if wanted == "csl":
        body = json.dumps([csl.csl_json(work)], indent=1)
        return Response(body, content_type="application/vnd.citationstyles.csl+json")
    if wanted == "bibtex":
        return Response(bibtex.bibtex(work), content_type="application/x-bibtex; charset=utf-8")
    if wanted == "ris":
        return Response(
            ris.ris(work), content_type="application/x-research-info-systems; charset=utf-8"
        )
    if wanted == "oai_dc":
        return Response(oai_dc_xml(item.dc), content_type="application/xml")
    try:
        text = styles.reference(work, request.args.get("style") or styles.DEFAULT_STYLE)
    except styles.UnknownStyle as exc:
        return error_response(str(exc), 406)
    return Response(text + "\n", content_type="text/x-bibliography; charset=utf-8")


def page_facts(site: Context, item: Item, work: Work, links: Links, described: list) -> dict:
    def landing_of(ibi) -> dict | None:
        other = site.catalog.lookup(ibi) if ibi else None
        if other is None:
            return None
        titles = (other.dc or {}).get("title") or [other.name.text]
        return {"ibi": other.name.text, "title": titles[0], "url": links.landing(other)}

    last = follow_editions(site.catalog.lookup, item).last
    return {
        "work": work,
        "item": item,
        "deleted": item.state == "Deleted",
        "removed": f"{when(work.removed)} UTC" if work.removed else None,
        "licensed_out": bool(item.networks) and not site.licensed(item),
        "files": [(f, human_size(f.size)) for f in work.files],
        "location": item.location,
        "forms": [f for f in (item.forms.rep, item.forms.ibip) if f],
        "translations": [(lang, landing_of(ibi)) for lang, ibi in listed_translations(item)],
        "previous": previous_edition(site, item, links),
        "next": landing_of(item.nextedition),
        "last": landing_of(last.name) if last is not item else None,
        "formats": described,
        "reference": apa.apa(work, tag()),  # in the page's language; the exports are not
        "highwire": highwire.highwire(work),
        # No `<` in a script's text: `</` closed it, `<!--<script` made its own `</script>`
        # leave it open (HTML's double-escaped state) and the page after it script text.
        "jsonld": json.dumps(jsonld.jsonld(work)).replace("<", "\\u003c"),
        "dc": item.dc or {},
    }


def previous_edition(site: Context, item: Item, links: Links) -> dict | None:
    mine = set(item.keys())
    for directory in site.catalog.referrers(mine):
        other = site.catalog.item_at(directory)
        if other is not None and other.nextedition and other.nextedition.key in mine:
            titles = (other.dc or {}).get("title") or [other.name.text]
            return {"ibi": other.name.text, "title": titles[0], "url": links.landing(other)}
    return None


def mediatype_of(name: str) -> str:
    return headers.media_type(name)[0]


def with_vary(response: Response) -> Response:
    response.vary.add("Accept")
    return response
