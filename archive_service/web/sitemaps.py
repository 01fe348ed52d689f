"""`/robots.txt`, the sitemap index and the sitemaps (sitemaps.org 0.9) of the landing pages
of the served items, Deleted ones left out, `lastmod` their version's time.

Each sitemap covers SITEMAP_ROWS rows of the index in collection order (at most that many
URLs, fewer where items are not served or Deleted), read page by page (keyset paging,
`StoreCatalog.landing_rows`, no record decoded) and streamed: memory stays flat at any size
of collection."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from xml.sax.saxutils import escape

from flask import Blueprint, Response, abort, request, stream_with_context

from ..protocol.answers import Links

SITEMAP_ROWS = 50_000  # the protocol's limit of URLs per sitemap
READ_ROWS = 1000  # rows of the index read at a time (and the XML sent at a time)
XML = "application/xml"
NS = "http://www.sitemaps.org/schemas/sitemap/0.9"


def blueprint(catalog, links: Callable[[dict], Links], service_path: str) -> Blueprint:
    pages = Blueprint("sitemaps", __name__)

    @pages.get("/robots.txt", endpoint="robots")
    def robots() -> Response:
        body = f"User-agent: *\nAllow: /\nSitemap: {links(request.environ).service}/sitemap.xml\n"
        return Response(body, content_type="text/plain; charset=utf-8")

    @pages.get(service_path + "/sitemap.xml", endpoint="index")
    def index() -> Response:
        service = links(request.environ).service
        count = max(1, -(-catalog.rows() // SITEMAP_ROWS))
        entries = "".join(
            f"<sitemap><loc>{service}/sitemap/{n}.xml</loc></sitemap>\n" for n in range(count)
        )
        body = (
            f'<?xml version="1.0" encoding="UTF-8"?>\n<sitemapindex xmlns="{NS}">\n'
            f"{entries}</sitemapindex>\n"
        )
        return Response(body, content_type=XML)

    @pages.get(service_path + "/sitemap/<int:number>.xml", endpoint="sitemap")
    def sitemap(number: int) -> Response:
        if number >= -(-catalog.rows() // SITEMAP_ROWS) and number > 0:
            abort(404)
        # Rows [number × SITEMAP_ROWS, (number + 1) × SITEMAP_ROWS): after the row before
        # the first, up to the first row of the next sitemap.
        after = catalog.directory_at(number * SITEMAP_ROWS - 1) if number else ""
        stop = catalog.directory_at((number + 1) * SITEMAP_ROWS)
        urls = _urls(catalog, links(request.environ), after or "", stop)
        return Response(stream_with_context(urls), content_type=XML)

    return pages


def _urls(catalog, site: Links, after: str, stop: str | None) -> Iterator[str]:
    yield f'<?xml version="1.0" encoding="UTF-8"?>\n<urlset xmlns="{NS}">\n'
    while after is not None:
        found, after = catalog.landing_rows(after, stop, READ_ROWS)
        yield "".join(
            f"<url><loc>{escape(site.item_url(name))}</loc><lastmod>{timestamp[:10]}</lastmod>"
            "</url>\n"
            for _, name, state, timestamp in found
            if state != "Deleted"
        )
    yield "</urlset>\n"
