"""A collection's file under /col/, with no Flask: where a request's path leads (`locate`: the
item, its licence, the file under its doc/), the response that sends it (`send`: conditional
GET and Range, described from the open file) or has the proxy in front send it (`offload`:
file_offload), and `answer`, that response with its Link header and its use counted.

files.py's `col` route (create_app's app) and contrib's CGI program (web/cgi.py) both call
these, so that a CGI download imports neither Flask, Jinja nor Flask-Babel (issue 35): the
HTTP is Werkzeug's (Response, wrap_file, make_conditional), which costs a CGI process far
less than the whole app. What needs a page (403, 404, 416) is the caller's: the Flask app
renders it, the CGI program hands such a request to the whole app."""

from __future__ import annotations

import os
import stat
import unicodedata
import zlib
from pathlib import Path
from urllib.parse import quote

from werkzeug.exceptions import HTTPException, NotFound
from werkzeug.http import parse_range_header
from werkzeug.wrappers import Response
from werkzeug.wsgi import wrap_file

from ..collection import items
from ..common.fsnames import from_bytes, from_os
from ..stores.stats import counter
from . import headers
from .core import Core


def _file_response(*args, **kwargs) -> Response:
    """A collection file's answer. Its words are the depositor's, in whatever language they
    wrote: not the pages' Content-Language chosen by the reader's Accept-Language or cookie
    (common/i18n.py `language_headers`), which an HTML file carried before. An attribute of
    the response, not of a class: Flask turns a view's Werkzeug response into its own class."""
    response = Response(*args, **kwargs)
    response.pages_language = False
    return response


class Refused(Exception):
    """The file's item is licensed and the client is outside its networks (403)."""


# What `locate` and `answer` raise for an answer that is a page: 403, 404, 416.
PAGES = (Refused, HTTPException)


def displayable(name: str) -> str:
    """A file-system name as text for people (bytes that are not UTF-8 shown as U+FFFD)."""
    return name.encode("utf-8", "surrogateescape").decode("utf-8", "replace")


def described(path: Path) -> tuple[str, str, str | None]:
    """The name a file at `path` is shown by, its Content-Type and its Content-Encoding."""
    name = displayable(from_os(path.name))
    return (name, *headers.media_type(name))


def locate(core: Core, environ) -> tuple[items.Item, Path] | None:
    """The item and the real path of the /col/ file a request asks for; None when there is
    none (404); Refused when its item is licensed and the client outside its networks."""
    # Names on disk are bytes: take them from the raw PATH_INFO, not Werkzeug's decoding.
    raw = from_bytes(environ.get("PATH_INFO", "").encode("latin-1"))
    segments = raw.split("/")[2:]  # after "", "col"
    for size in (4, 2):
        if len(segments) > size + 1 and segments[size] == items.DOC:
            item = core.catalog.item_at("/".join(segments[:size]))
            if item is not None and item.state != "Deleted":  # a tombstone serves nothing
                if not core.allows(item, environ):  # before the path: no probing either
                    raise Refused
                real = items.resolve_file(
                    core.catalog.root, item.directory, "/".join(segments[size + 1 :])
                )
                return None if real is None else (item, real)
    return None


def answer(core: Core, environ, item: items.Item, real: Path) -> Response:
    """The response of a request for `real`, a file of `item`: handed to the proxy in front
    when file_offload says so and it can name the file, else sent (NotFound and
    RequestedRangeNotSatisfiable raised); its Link header; its use counted."""
    config = core.config
    response = None
    if config.file_offload != "none":
        response = offload(config.file_offload, real, core.real_root, Path(config.collection))
    if response is None:
        response = send(real, environ)
    # A use once the file is served: a range not satisfiable (416, raised) or a failed
    # If-Match (412) serves none and is no use (docs/counter.md).
    if response.status_code < 400:
        core.record_use(item, counter.REQUEST, environ)
    response.headers["Link"] = core.member_link(item, environ)
    return response


def _filename_options(name: str) -> dict[str, str]:
    # As send_file writes it: an ASCII filename, plus filename* (RFC 5987) when needed.
    if name.isascii():
        return {"filename": name}
    simple = unicodedata.normalize("NFKD", name).encode("ascii", "ignore").decode("ascii")
    return {"filename": simple, "filename*": "UTF-8''" + quote(name, safe="!#$&+-.^_`|~")}


def _etag(path: Path, st: os.stat_result) -> str:
    # Werkzeug's own ETag encodes the path as UTF-8; file names here may be any bytes.
    return f"{st.st_mtime_ns:x}-{st.st_size:x}-{zlib.adler32(os.fsencode(path)):x}"


def send(path: Path, environ) -> Response:
    """The file at `path` with conditional GET and Range (what send_file does), but described
    from the open file: a file replaced or removed meanwhile is served whole from one version,
    or is a 404, never a length of one version with the bytes of another."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        raise NotFound() from None
    stream = os.fdopen(fd, "rb")
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise NotFound()
        name, kind, encoding = described(path)
        # 64 KB blocks: few enough for Python's loop (100 MB over loopback: 0.10 s against
        # sendfile's 0.08 s), small enough for a slow client to take each in client_timeout.
        response = _file_response(
            wrap_file(environ, stream, buffer_size=64 * 1024),
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
        response.make_conditional(
            _range_as_served(environ, st.st_size), accept_ranges=True, complete_length=st.st_size
        )
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


def _range_as_served(environ, size: int):
    """`environ` with its Range header as this Archive reads it, for make_conditional."""
    ranges = parse_range_header(environ.get("HTTP_RANGE"))
    one = ranges is not None and ranges.units.lower() == "bytes" and len(ranges.ranges) == 1
    if "HTTP_RANGE" in environ and not one:
        # Werkzeug answers 416 to a Range that is not one bytes range (another unit,
        # several ranges, bad syntax), where RFC 9110 (14.2) has it ignored: the file.
        return {k: v for k, v in environ.items() if k != "HTTP_RANGE"}
    if one and ranges.ranges[0][1] is None and -ranges.ranges[0][0] > size > 0:
        # A suffix longer than the file selects all of it (RFC 9110 14.1.2); Werkzeug
        # answered 416, so `bytes=-1000000` (a reader's "the last MB") got nothing.
        return {**environ, "HTTP_RANGE": "bytes=0-"}
    return environ


OFFLOAD_LOCATION = "/.archive-service-files/"  # nginx's internal location for the collection
# Past this, a file is sent by serve, not named to nginx: nginx holds an answer's headers in
# its 4 KB proxy_buffer_size, and a deep path of accented names (each UTF-8 byte three
# characters escaped) made a 4 KB X-Accel-Redirect: 502 (issue 30, seventh pass).
OFFLOAD_HEADER = 2048


def offload(how: str, real: Path, root: Path, named: Path) -> Response | None:
    """A response that has the proxy in front send the file `real` (X-Accel-Redirect to the
    collection's internal location, percent-encoded as nginx decodes it; or X-Sendfile with
    its path's bytes, which mod_xsendfile 0.12 takes as they are); None when that cannot
    name it. `root` is the collection's real path, `named` the collection as configured."""
    if not real.is_relative_to(root):  # outside (items.resolve_file serves none): serve it
        return None
    name, kind, encoding = described(real)
    response = _file_response(mimetype=kind)
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
        # The file's own ETag, as send gives it: on a proxied answer mod_xsendfile makes
        # one from no file ("0" for every file), so a cache kept a changed file for ever
        # and `If-None-Match: "0"` had 304 for any file. It keeps one the answer carries.
        response.set_etag(_etag(real, st))
    else:
        where = OFFLOAD_LOCATION + quote(os.fsencode(real.relative_to(root)), safe="/")
        if len(where) > OFFLOAD_HEADER:
            return None
        response.headers["X-Accel-Redirect"] = where
    return response
