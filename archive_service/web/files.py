"""The collection's files and what is read of them: `/col/<item>/doc/<file>` (with conditional
GET and Range, or handed to the proxy in front: file_offload), and each item's file list and
metadata page under the service's path. A Blueprint made per app by `blueprint(site)`."""

from __future__ import annotations

import os
import stat
import unicodedata
import zlib
from pathlib import Path
from urllib.parse import quote

from flask import Blueprint, Response, abort, render_template, request
from flask_babel import gettext
from werkzeug.http import parse_range_header
from werkzeug.wsgi import wrap_file

from ..collection import items
from ..collection.sidecar import DC_ELEMENTS
from ..common.fsnames import from_bytes, from_os
from ..http_errors import error_response
from ..oai.records import oai_dc_xml
from ..stores.stats import counter
from . import headers
from .site import HTML, Site


def displayable(name: str) -> str:
    """A file-system name as text for people (bytes that are not UTF-8 shown as U+FFFD)."""
    return name.encode("utf-8", "surrogateescape").decode("utf-8", "replace")


def _filename_options(name: str) -> dict[str, str]:
    # As send_file writes it: an ASCII filename, plus filename* (RFC 5987) when needed.
    if name.isascii():
        return {"filename": name}
    simple = unicodedata.normalize("NFKD", name).encode("ascii", "ignore").decode("ascii")
    return {"filename": simple, "filename*": "UTF-8''" + quote(name, safe="!#$&+-.^_`|~")}


def _etag(path: Path, st: os.stat_result) -> str:
    # Werkzeug's own ETag encodes the path as UTF-8; file names here may be any bytes.
    return f"{st.st_mtime_ns:x}-{st.st_size:x}-{zlib.adler32(os.fsencode(path)):x}"


def _send(path: Path) -> Response:
    """The file at `path` with conditional GET and Range (what send_file does), but described
    from the open file: a file replaced or removed meanwhile is served whole from one version,
    or is a 404, never a length of one version with the bytes of another."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        abort(404)
    stream = os.fdopen(fd, "rb")
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            abort(404)
        name = displayable(from_os(path.name))
        # 64 KB blocks: few enough for Python's loop (100 MB over loopback: 0.10 s against
        # sendfile's 0.08 s), small enough for a slow client to take each in client_timeout.
        kind, encoding = headers.media_type(name)
        response = Response(
            wrap_file(request.environ, stream, buffer_size=64 * 1024),
            direct_passthrough=True,
            mimetype=kind,
        )
        if encoding:
            response.content_encoding = encoding
        response.content_length = st.st_size
        response.last_modified = st.st_mtime
        response.cache_control.no_cache = True
        response.headers.set("Content-Disposition", "inline", **_filename_options(name))
        response.set_etag(_etag(path, st))
        environ = request.environ
        ranges = parse_range_header(environ.get("HTTP_RANGE"))
        one = ranges is not None and ranges.units.lower() == "bytes" and len(ranges.ranges) == 1
        if "HTTP_RANGE" in environ and not one:
            # Werkzeug answers 416 to a Range that is not one bytes range (another unit,
            # several ranges, bad syntax), where RFC 9110 (14.2) has it ignored: the file.
            environ = {k: v for k, v in environ.items() if k != "HTTP_RANGE"}
        elif one and ranges.ranges[0][1] is None and -ranges.ranges[0][0] > st.st_size > 0:
            # A suffix longer than the file selects all of it (RFC 9110 14.1.2); Werkzeug
            # answered 416, so `bytes=-1000000` (a reader's "the last MB") got nothing.
            environ = {**environ, "HTTP_RANGE": "bytes=0-"}
        response.make_conditional(environ, accept_ranges=True, complete_length=st.st_size)
        if response.status_code == 412:
            # Werkzeug keeps the body of a 412: the whole file went out under a status
            # counted as no use (docs/counter.md).
            stream.close()
            response.direct_passthrough = False
            response.set_data(b"")
        return response
    except BaseException:
        stream.close()
        raise


OFFLOAD_LOCATION = "/.archive-service-files/"  # nginx's internal location for the collection
# Past this, a file is sent by serve, not named to nginx: nginx holds an answer's headers in
# its 4 KB proxy_buffer_size, and a deep path of accented names (each UTF-8 byte three
# characters escaped) made a 4 KB X-Accel-Redirect: 502 (issue 30, seventh pass).
OFFLOAD_HEADER = 2048


def _offload(how: str, real: Path, root: Path, named: Path) -> Response | None:
    """A response that has the proxy in front send the file `real` (X-Accel-Redirect to the
    collection's internal location, percent-encoded as nginx decodes it; or X-Sendfile with
    its path's bytes, which mod_xsendfile 0.12 takes as they are); None when that cannot
    name it. `root` is the collection's real path, `named` the collection as configured."""
    if not real.is_relative_to(root):  # outside (items.resolve_file serves none): serve it
        return None
    name = displayable(from_os(real.name))
    kind, encoding = headers.media_type(name)
    response = Response(mimetype=kind)
    if encoding:
        response.content_encoding = encoding
    response.cache_control.no_cache = True
    response.headers.set("Content-Disposition", "inline", **_filename_options(name))
    if how == "x-sendfile":
        # Under the collection as configured, which is the XSendFilePath the admin writes:
        # mod_xsendfile compares paths without resolving links, so a symlinked collection
        # named by its real path was refused (404).
        raw = os.fsencode(named / real.relative_to(root))
        if any(byte < 0x20 or byte == 0x7F for byte in raw):  # no header can carry those
            return None
        try:
            st = os.stat(real)
        except OSError:
            return None
        response.headers["X-Sendfile"] = raw.decode("latin-1")  # WSGI: bytes as latin-1
        # The file's own ETag, as _send gives it: on a proxied answer mod_xsendfile makes
        # one from no file ("0" for every file), so a cache kept a changed file for ever
        # and `If-None-Match: "0"` had 304 for any file. It keeps one the answer carries.
        response.set_etag(_etag(real, st))
    else:
        where = OFFLOAD_LOCATION + quote(os.fsencode(real.relative_to(root)), safe="/")
        if len(where) > OFFLOAD_HEADER:
            return None
        response.headers["X-Accel-Redirect"] = where
    return response


def blueprint(site: Site) -> Blueprint:
    files = Blueprint("files", __name__)
    config, catalog = site.config, site.catalog

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
        # Names on disk are bytes: take them from the raw PATH_INFO, not Werkzeug's decoding.
        raw = from_bytes(request.environ.get("PATH_INFO", "").encode("latin-1"))
        segments = raw.split("/")[2:]  # after "", "col"
        for size in (4, 2):
            if len(segments) > size + 1 and segments[size] == items.DOC:
                item = catalog.item_at("/".join(segments[:size]))
                if item is not None and item.state != "Deleted":  # a tombstone serves nothing
                    if not site.licensed(item):  # before the path: no probing either
                        abort(403, gettext("Licensed: served only inside its networks."))
                    real = items.resolve_file(
                        catalog.root, item.directory, "/".join(segments[size + 1 :])
                    )
                    if real is None:
                        break
                    if config.file_offload != "none":
                        offloaded = _offload(
                            config.file_offload, real, site.real_root, Path(config.collection)
                        )
                        if offloaded is not None:
                            site.used(item, counter.REQUEST)
                            return site.signposted(offloaded, item)
                    # A use once the file is served: a range not satisfiable (416, raised) or
                    # a failed If-Match (412) serves none and is no use (docs/counter.md).
                    response = _send(real)
                    if response.status_code < 400:
                        site.used(item, counter.REQUEST)
                    return site.signposted(response, item)
        abort(404)

    return files
