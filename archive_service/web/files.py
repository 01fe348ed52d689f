"""The collection's files and what is read of them: `/col/<item>/doc/<file>` (web/download.py:
conditional GET and Range, or handed to the proxy in front: file_offload), and each item's
file list and metadata page under the service's path. A Blueprint made per app by
`blueprint(site)`."""

from __future__ import annotations

from flask import Blueprint, Response, abort, render_template, request
from flask_babel import gettext

from ..collection import items
from ..collection.sidecar import DC_ELEMENTS
from ..http_errors import error_response
from ..oai.records import oai_dc_xml
from ..stores.stats import counter
from . import download
from .download import displayable
from .site import HTML, Site


def blueprint(site: Site) -> Blueprint:
    files = Blueprint("files", __name__)
    catalog = site.catalog

    @files.get(site.service_path + "/filelist/<path:directory>", endpoint="filelist")
    def filelist(directory: str) -> Response:
        item = site.item_or_404(directory)
        shown = None
        if item.filelist_public and site.licensed(item):
            links = site.links(request.environ)
            shown = [
                (displayable(rel), links.file(item, rel), size)
                for rel, size in items.list_files(catalog.root, item)
            ]
        page = render_template(
            "filelist.html",
            ibi=item.name.text,
            files=shown,
            location=item.location,
            landing=site.links(request.environ).landing(item),
        )
        if shown is not None:
            site.used(item, counter.INVESTIGATION)
        return Response(page, status=200 if shown is not None else 403, content_type=HTML)

    @files.get(site.service_path + "/metadata/<path:directory>", endpoint="metadata")
    def metadata(directory: str) -> Response:
        item = site.item_or_404(directory)
        if not item.dc:
            abort(404)
        fmt = request.args.get("format")
        if fmt == "oai_dc":
            site.used(item, counter.INVESTIGATION)
            record = Response(oai_dc_xml(item.dc), content_type="text/xml; charset=utf-8")
            return site.signposted(record, item)
        if fmt:
            return error_response("unknown metadata format; oai_dc is the one offered", 404)
        dc = [(e, item.dc[e]) for e in DC_ELEMENTS if e in item.dc]
        page = render_template(
            "metadata.html",
            ibi=item.name.text,
            dc=dc,
            oai_dc=site.links(request.environ).metadata(item, "oai_dc"),
            landing=site.links(request.environ).landing(item),
        )
        site.used(item, counter.INVESTIGATION)
        return site.signposted(Response(page, content_type=HTML), item)

    @files.get("/col/<path:rest>", endpoint="col")
    def col(rest: str) -> Response:
        try:
            found = download.locate(site, request.environ)
        except download.Refused:
            abort(403, gettext("Licensed: served only inside its networks."))
        if found is None:
            abort(404)
        return download.answer(site, request.environ, *found)

    return files
