"""The WSGI application: the Archive service, its file lists and metadata pages, and /col/.

`create_app(config)` builds every app: `archive-service serve`, a gunicorn command line
(`gunicorn 'archive_service.web:create_app_from_env()'`) and mod_wsgi get the same one.
Paths are relative to the WSGI mount point (SCRIPT_NAME); absolute URLs handed to the
resolver are built from `archiveaddress`, never from the request's Host header.
"""

from __future__ import annotations

import ipaddress
import json
import logging
import mimetypes
import os
import stat
import threading
import unicodedata
import zlib
from collections.abc import Callable, Mapping
from datetime import UTC, datetime, timedelta
from functools import lru_cache
from http import HTTPStatus
from pathlib import Path
from typing import Any
from urllib.parse import quote

from flask import Flask, Response, abort, redirect, render_template, request, url_for
from flask.logging import default_handler
from flask_babel import gettext
from werkzeug.http import parse_range_header
from werkzeug.wsgi import wrap_file

from .. import settings
from ..collection import items as index
from ..collection.sidecar import DC_ELEMENTS
from ..common import pages
from ..common.fsnames import from_bytes, from_os
from ..common.http import TEXT, answer_unexpected_errors, error_response
from ..common.net import client_address, persistent_url
from ..indexer.startup import LiveIndex
from ..indexer.vouch import Vouched
from ..oai.records import oai_dc_xml
from ..protocol import answers, pairs, urlkeys
from ..protocol.answers import Archive, Links, RequestError
from ..protocol.errors import error_body
from ..serve import inclusion
from . import (
    counter,
    headers,
    health,
    landing,
    limits,
    page_limit,
    signposting,
    sitemaps,
    stats,
    sushi,
    usage,
)
from .acknowledgers import acknowledgers
from .oai import oai_blueprint, oai_provider

log = logging.getLogger(__name__)

PAGES = (
    "filelist.html",
    "metadata.html",
    "service.html",
    "items.html",
    "statistics.html",
    "landing.html",
)
# Read with the module's code (see common/pages.py): an app made later by a process that can no
# longer read the package's files (privileges dropped, a tree only its installer reads) still
# has its pages.
PAGE_SOURCES = pages.sources(Path(__file__).with_name("templates"), PAGES)
HTML = "text/html; charset=utf-8"
STATISTICS_DAYS = 30  # what the statistics page counts
HEALTH = ("health", "service_health")  # its endpoints


def _displayable(name: str) -> str:
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
        name = _displayable(from_os(path.name))
        # 64 KB blocks: few enough for Python's loop (100 MB over loopback: 0.10 s against
        # sendfile's 0.08 s), small enough for a slow client to take each in client_timeout.
        response = Response(
            wrap_file(request.environ, stream, buffer_size=64 * 1024),
            direct_passthrough=True,
            mimetype=mimetypes.guess_type(name)[0] or "application/octet-stream",
        )
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
        return response.make_conditional(environ, accept_ranges=True, complete_length=st.st_size)
    except BaseException:
        stream.close()
        raise


def _served_here(url: str, site: Links) -> bool:
    """Whether this app serves `url` itself (a /col/ file or a page), so that it sees the use
    when the user fetches it: not a file published by another server at `url_base`."""
    if url.startswith(site.files + "/"):
        return site.files == site.site + "/col"  # else url_base: another server's
    return url.startswith(site.site + "/")


OFFLOAD_LOCATION = "/.archive-service-files/"  # nginx's internal location for the collection


def _offload(how: str, real: Path, root: Path, named: Path) -> Response | None:
    """A response that has the proxy in front send the file `real` (X-Accel-Redirect to the
    collection's internal location, percent-encoded as nginx decodes it; or X-Sendfile with
    its path's bytes, which mod_xsendfile 0.12 takes as they are); None when that cannot
    name it. `root` is the collection's real path, `named` the collection as configured."""
    if not real.is_relative_to(root):  # outside (index.resolve_file serves none): serve it
        return None
    name = _displayable(from_os(real.name))
    response = Response(mimetype=mimetypes.guess_type(name)[0] or "application/octet-stream")
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
        response.headers["X-Accel-Redirect"] = OFFLOAD_LOCATION + quote(
            os.fsencode(real.relative_to(root)), safe="/"
        )
    return response


class ArchiveRoot:
    """WSGI middleware: the app's routes are relative to the Archive's root, yet a server may
    mount it at the root, at `/<archiveserviceibi>` (mod_wsgi's WSGIScriptAlias, a proxy that
    sets SCRIPT_NAME) or at `/col`. A mount point ending in one of those is moved back from
    SCRIPT_NAME into PATH_INFO, so every route, and every URL built from script_root, is right."""

    def __init__(self, app, mounts: tuple[str, ...]):
        self.app = app
        self.mounts = mounts

    def __call__(self, environ, start_response):
        script = environ.get("SCRIPT_NAME", "").rstrip("/")
        for mount in self.mounts:
            if script.endswith(mount):
                environ["SCRIPT_NAME"] = script[: -len(mount)]
                environ["PATH_INFO"] = mount + environ.get("PATH_INFO", "")
                break
        return self.app(environ, start_response)


class ServiceEndpoint:
    """WSGI middleware: GET and HEAD at the service's path are answered by `answer(environ)`
    (status, ASCII pairs body) without Flask's request context, routing and response objects,
    which cost a worker about as much again as the protocol itself. Every other request,
    and every other method at that path (405, OPTIONS), goes on to Flask."""

    STATUS = {code: f"{code} {HTTPStatus(code).phrase}" for code in (200, 400, 500)}

    def __init__(self, app, path: str, answer):
        self.app = app
        self.path = path
        self.answer = answer

    def __call__(self, environ, start_response):
        method = environ.get("REQUEST_METHOD")
        if (
            environ.get("PATH_INFO") != self.path
            or method not in ("GET", "HEAD")
            or not environ.get("QUERY_STRING")  # a browser, not a resolver: Flask redirects
        ):
            return self.app(environ, start_response)
        status, body = self.answer(environ)
        start_response(
            self.STATUS[status], [("Content-Type", TEXT), ("Content-Length", str(len(body)))]
        )
        return [] if method == "HEAD" else [body]


class _Following:
    """WSGI middleware: make sure the collection's indexer runs, from the first request on
    (after any fork), before every request (a cheap check once it runs)."""

    def __init__(self, app, live: LiveIndex):
        self.app = app
        self.live = live

    def __call__(self, environ, start_response):
        self.live.follow()
        return self.app(environ, start_response)


class _NotIndexed:
    """WSGI app of an Archive whose collection has no index yet, where the app must not build
    one (CGI, mod_wsgi): 503 and one line saying what to run, until the index is complete;
    then the Archive itself (a mod_wsgi daemon lives on after `archive-service index`)."""

    BODY = b"The Archive's index is not built yet: run archive-service index\n"

    def __init__(self, live: LiveIndex, build: Callable[[], Flask]):
        self.live = live
        self.build = build
        self.app: Flask | None = None
        self.lock = threading.Lock()

    def __call__(self, environ, start_response):
        if self.app is None and self.live.store.is_complete():
            with self.lock:
                if self.app is None:
                    self.app = self.build()
        if self.app is not None:
            return self.app(environ, start_response)
        log.error(
            "no index of the collection %s in %s yet: run archive-service index",
            self.live.config.collection,
            self.live.store.state_dir,
        )
        start_response(
            "503 Service Unavailable",
            [("Content-Type", TEXT), ("Content-Length", str(len(self.BODY)))],
        )
        return [] if environ.get("REQUEST_METHOD") == "HEAD" else [self.BODY]


def create_app(config: settings.Config | Mapping[str, Any], *, refresh: bool = True) -> Flask:
    """Build the WSGI app for one Archive from validated settings (or a mapping of them).

    `refresh`: bring the index up to date with the collection first (a walk of it; `serve`).
    False where processes are short-lived or started by a request (CGI, mod_wsgi): the app
    answers from the index as it stands, which `archive-service index --watch` (or `index`
    from a timer) keeps current, and answers 503 while there is no complete index."""
    if not isinstance(config, settings.Config):
        config = settings.load(options=dict(config), environ={})
    config.require("collection", "archiveaddress", "archiveserviceibi")

    app = Flask(__name__)
    # Werkzeug would answer `//` with a redirect to a URL built from the Host header.
    app.url_map.merge_slashes = False
    # Log through the root logger (gunicorn's or the CLI's), not into wsgi.errors.
    app.logger.removeHandler(default_handler)
    app.config["ARCHIVE_SERVICE"] = config

    # The persistent index: re-read what changed since it was last brought up to date.
    # Following later changes starts after forking (serve's workers, create_app_from_env),
    # or when the embedding code calls app.extensions["archive_index"].follow().
    live = LiveIndex(config)
    if refresh:
        live.refresh()
        for problem in live.catalog.problems:
            log.warning("%s", problem)
        log.info("indexed %d items from %s", live.catalog.count(), config.collection)
    elif not live.store.is_complete():
        app.extensions["archive_index"] = live
        app.wsgi_app = _NotIndexed(live, lambda: create_app(config, refresh=False))
        return app
    catalog = live.catalog
    catalog.close()  # nothing open in this process if it forks workers next
    # Both live in state_dir, or in the database every node shares; an unusable one is
    # logged and the service answers anyway.
    keys = urlkeys.UrlKeys.of_archive(config.state_dir, config.database)
    store = stats.open_store(
        config.state_dir, config.database, retention_days=config.stats_retention_days
    )
    archive = Archive(
        catalog,
        config.archiveaddress,
        config.archiveserviceibi,
        config.platformsoftware,
        urlkeys=keys,
        resolve_file=index.resolve_file,
        current=Vouched(live.store),
    )
    app.extensions["archive"] = archive
    app.extensions["stats"] = store
    figures = usage.Usage(store, config.archiveserviceibi)
    app.extensions["archive_index"] = live
    # Each request reads one snapshot of the index: never half of an indexer's commit.
    app.teardown_request(lambda exc: catalog.end())
    pages.install(app, PAGE_SOURCES, compile_now=refresh, home="about")
    headers.install(app, files_endpoint="col", scripts=(landing.COPY_SCRIPT,))
    service_path = "/" + config.archiveserviceibi

    @app.context_processor
    def navigation() -> dict:
        # Paths from the mount point (url_for reads SCRIPT_NAME), on every page; the
        # Archive's page by its path under the service's, which every deployment forwards.
        return {
            "nav": [
                (gettext("The Archive"), url_for("about")),
                (gettext("Items"), url_for("items")),
                (gettext("Statistics"), url_for("statistics")),
            ]
        }

    def links(environ) -> Links:
        # The mount point as Werkzeug reads it (request.script_root), without a request object.
        root = environ.get("SCRIPT_NAME", "").encode("latin-1").decode(errors="replace")
        return _links(root.rstrip("/"))

    @lru_cache(maxsize=16)  # one per mount point the app is reached at
    def _links(script_root: str) -> Links:
        return Links("http://" + config.archiveaddress + script_root, service_path, config.url_base)

    def item_or_404(directory: str) -> index.Item:
        item = catalog.item_at(directory)
        if item is None or item.state == "Deleted":
            abort(404)
        return item

    trusted = tuple(ipaddress.ip_network(n) for n in config.trusted_proxies)
    real_root = Path(catalog.root).resolve()

    def licensed_to_user(item: index.Item) -> bool:
        return answers.client_allowed(item, client_address(request.environ, trusted))

    def signposted(response: Response, item: index.Item) -> Response:
        # A /col/ file or a metadata record: cite-as and collection (FAIR Signposting).
        site = links(request.environ)
        cite_as = persistent_url(config.resolver, item.name.text) or site.landing(item)
        response.headers["Link"] = signposting.member_header(cite_as, site.landing(item))
        return response

    def answer(environ) -> tuple[int, bytes]:
        """The service (MontarResposta) for one WSGI request: its status and pairs body."""
        try:
            problem = limits.problem(environ)
            if problem:
                return 400, error_body(problem).encode()
            catalog.begin()
            try:
                query = pairs.parse_query(environ.get("QUERY_STRING", ""))
                site = links(environ)
                body = answers.monta_resposta(query, archive, site)
                if query["servicesubject"] == "acknowledgment":
                    store.acknowledge(acknowledgment(query, site, environ), keys)
                return 200, body.encode("ascii")
            finally:
                catalog.end()
        except (RequestError, pairs.PairsError) as exc:
            return 400, error_body(str(exc)).encode()
        except Exception:
            log.exception("unexpected error on %s", environ.get("PATH_INFO"))
            return 500, error_body("internal error").encode()

    @app.get(service_path, endpoint="service")
    def service() -> Response:
        # ServiceEndpoint answers GET and HEAD before Flask; the route gives the path Flask's
        # 405 and OPTIONS, and answers the same way should anything reach it. A request with
        # no query at all is a person who opened the service URL: the Archive's page.
        if not request.environ.get("QUERY_STRING"):
            return redirect(url_for("about"), 303)
        status, body = answer(request.environ)
        return Response(body, status=status, content_type=TEXT)

    senders = acknowledgers(config)  # whose acknowledgments count (resolver_networks)

    def acknowledgment(query: dict[str, str], site: Links, environ) -> stats.Acknowledgment:
        # Counted under the item its URL names, with that item's state and the contenttype
        # the answer gave the URL; the claimed `ibi`, `contenttype` and `state` are ignored.
        named = archive.item_of_url(query["url"], site, query.get("ibi"))
        item, contenttype = named if named else (None, "")
        return stats.Acknowledgment(
            urlkey=query["urlkey"],
            url=query["url"],
            contenttype=contenttype,
            state=item.state if item else "",
            ibi=item.name.text if item else None,
            access=counter.access_type(item.networks) if item else counter.OPEN,
            # The user first, then proxies (SPEC: IP *(SP IP)); checked by monta_resposta.
            client=query["clientinformation.ipaddress"].split()[0],
            served_here=_served_here(query["url"], site),
            from_resolver=(sender := client_address(environ, trusted)) is not None
            and sender in senders,
        )

    def used(item: index.Item, kind: str) -> None:
        # What COUNTER counts of the pages and files served here (docs/counter.md); a HEAD
        # fetches nothing. The store hashes the address: it is never kept.
        if request.method == "GET":
            address = client_address(request.environ, trusted)
            agent = request.environ.get("HTTP_USER_AGENT", "")
            access = counter.access_type(item.networks)
            store.record_use(stats.Seen(item.name.text, kind, str(address or ""), agent, access))

    @app.before_request
    def start_request() -> Response | None:
        # One hook, not two: each costs a few microseconds of Flask on every request.
        problem = limits.problem(request.environ)
        if problem:
            return error_response(problem)
        try:
            # Werkzeug's request.args decodes the raw query as strict UTF-8: a raw byte that is
            # not (`?q=\xff` from a client that escapes nothing) was a 500 on every page.
            request.environ.get("QUERY_STRING", "").encode("latin-1").decode("utf-8")
        except UnicodeError:
            return error_response("the query string has raw bytes that are not UTF-8")
        if request.endpoint not in HEALTH:  # it must answer when the index cannot be read
            catalog.begin()
        return None

    @app.get(service_path + "/filelist/<path:directory>", endpoint="filelist")
    def filelist(directory: str) -> Response:
        item = item_or_404(directory)
        files = None
        if item.filelist_public and licensed_to_user(item):
            site = links(request.environ)
            files = [
                (_displayable(rel), site.file(item, rel), size)
                for rel, size in index.list_files(catalog.root, item)
            ]
        page = render_template(
            "filelist.html",
            ibi=item.name.text,
            files=files,
            location=item.location,
            landing=links(request.environ).landing(item),
        )
        if files is not None:
            used(item, counter.INVESTIGATION)
        return Response(
            page, status=200 if files is not None else 403, content_type="text/html; charset=utf-8"
        )

    @app.get(service_path + "/metadata/<path:directory>", endpoint="metadata")
    def metadata(directory: str) -> Response:
        item = item_or_404(directory)
        if not item.dc:
            abort(404)
        fmt = request.args.get("format")
        if fmt == "oai_dc":
            used(item, counter.INVESTIGATION)
            record = Response(oai_dc_xml(item.dc), content_type="text/xml; charset=utf-8")
            return signposted(record, item)
        if fmt:
            return error_response("unknown metadata format; oai_dc is the one offered", 404)
        dc = [(e, item.dc[e]) for e in DC_ELEMENTS if e in item.dc]
        page = render_template(
            "metadata.html",
            ibi=item.name.text,
            dc=dc,
            oai_dc=links(request.environ).metadata(item, "oai_dc"),
            landing=links(request.environ).landing(item),
        )
        used(item, counter.INVESTIGATION)
        return signposted(Response(page, content_type="text/html; charset=utf-8"), item)

    @app.get("/col/<path:rest>", endpoint="col")
    def col(rest: str) -> Response:
        # Names on disk are bytes: take them from the raw PATH_INFO, not Werkzeug's decoding.
        raw = from_bytes(request.environ.get("PATH_INFO", "").encode("latin-1"))
        segments = raw.split("/")[2:]  # after "", "col"
        for size in (4, 2):
            if len(segments) > size + 1 and segments[size] == index.DOC:
                item = catalog.item_at("/".join(segments[:size]))
                if item is not None and item.state != "Deleted":  # a tombstone serves nothing
                    if not licensed_to_user(item):  # before the path: no probing either
                        abort(403, gettext("Licensed: served only inside its networks."))
                    real = index.resolve_file(
                        catalog.root, item.directory, "/".join(segments[size + 1 :])
                    )
                    if real is None:
                        break
                    if config.file_offload != "none":
                        offloaded = _offload(
                            config.file_offload, real, real_root, Path(config.collection)
                        )
                        if offloaded is not None:
                            used(item, counter.REQUEST)
                            return signposted(offloaded, item)
                    # A use once the file is served: a range not satisfiable (416, raised) or
                    # a failed If-Match (412) serves none and is no use (docs/counter.md).
                    response = _send(real)
                    if response.status_code < 400:
                        used(item, counter.REQUEST)
                    return signposted(response, item)
        abort(404)

    def overview() -> Response:
        # What the Archive is: one page at / and at the service's about page (its own item,
        # answers.service_item), whichever of the two a deployment forwards.
        site = links(request.environ)
        state = live.store
        refreshed = state.refreshed()
        page = render_template(
            "service.html",
            service=config.archiveserviceibi,
            url=site.service,
            archiveaddress=config.archiveaddress,
            platform=config.platformsoftware,
            contact=config.archiveadmemailaddress,
            items=catalog.count(),
            kinds=sorted(catalog.kinds().items()),
            resolver=None if config.resolver == "none" else config.resolver,
            inclusion=_inclusion(),
            refreshed=health.iso(refreshed),
            # A public page: no process ids, paths or the announcer's detail (issue 32).
            indexer=health.indexer_state(state),
            problem_count=len(catalog.problems),  # which and why name paths: for `check`
            list_url=url_for("items"),
            statistics_url=url_for("statistics"),
            health_url=url_for(HEALTH[1]),  # under the service path: every front forwards it
            oai_url=links(request.environ).service + "/oai",  # baseURL: from archiveaddress
        )
        return Response(page, content_type=HTML)

    def _inclusion() -> dict | None:
        known = inclusion.read(config.state_dir)
        if known is None:
            return None
        return {"state": known.state, "since": health.iso(known.time)}

    app.add_url_rule("/", "root", overview)
    app.add_url_rule(service_path + "/about", "about", overview)

    @app.get(service_path + "/items", endpoint="items")
    def items() -> Response:
        search = request.args.get("q", "")[:200]
        after, before = request.args.get("after", ""), request.args.get("before", "")
        found = catalog.page(after=after, before=before, search=search)
        if found is None:
            return Response(
                render_template(
                    "items.html",
                    archiveaddress=config.archiveaddress,
                    search=search,
                    list_url=url_for("items"),
                    unavailable=gettext(
                        "The item list needs the index, which cannot be kept now (see /health)."
                    ),
                ),
                status=503,
                content_type=HTML,
            )
        site = links(request.environ)
        rows = [_row(item, site) for item in found.items]
        query = {"q": search} if search else {}
        page = render_template(
            "items.html",
            archiveaddress=config.archiveaddress,
            search=search,
            items=rows,
            list_url=url_for("items"),
            next_url=url_for("items", **query, after=found.after) if found.after else None,
            previous_url=url_for("items", **query, before=found.before) if found.before else None,
        )
        return Response(page, content_type=HTML)

    def _row(item: index.Item, site: Links) -> dict:
        dc = item.dc or {}
        titles = dc.get("title") or [""]
        deleted = item.state == "Deleted"
        return {
            "ibi": item.name.text,
            "title": titles[0],
            "date": item.timestamp.isoformat(),
            "dcdate": (dc.get("date") or [None])[0],  # shown as given, in place of the date
            "state": item.state,
            "contenttype": item.contenttype,
            "deleted": deleted,
            "filelist": None if deleted else site.filelist(item),
            "metadata": site.metadata(item, None) if dc and not deleted else None,
            "persistent": persistent_url(config.resolver, item.name.text),
        }

    @app.get(service_path + "/statistics", endpoint="statistics")
    def statistics() -> Response:
        today = datetime.now(UTC).date()
        since = today - timedelta(days=STATISTICS_DAYS - 1)
        try:
            month = usage.month_of(request.args.get("month") or today.strftime("%Y-%m"))
        except ValueError as exc:
            return error_response(str(exc))
        # Usage is for those the COUNTER API answers: with counter_api_key, key holders.
        key = {"api_key": request.args["api_key"]} if "api_key" in request.args else {}
        shown = report = problem = None
        if sushi.allowed(key, config.counter_api_key):
            try:
                report = store.report(since=since, top=20)
                problem = store.problem
            except stats.StatsError as exc:
                report = stats.build_report([], [], since, None)
                problem = str(exc)
            try:
                shown = figures.page(month)
            except stats.StatsError as exc:
                shown, problem = None, problem or str(exc)
        if problem:  # for the operator: the page says only that there is one (paths, errors)
            log.warning("statistics page: %s", problem)
        page = render_template(
            "statistics.html",
            archiveaddress=config.archiveaddress,
            report=report,
            problem=problem,
            counter=shown,
            metric_types=counter.METRIC_TYPES,
            day_chart=shown and usage.chart(shown["days"], 7, usage.day_label),
            month_chart=shown and usage.chart(shown["months"], 3, usage.month_label),
            api=url_for("counter_ir"),
            # None in 1970-01: no use is before it, and the link led to a 400.
            previous=url_for(
                "statistics", month=usage.add_months(month, -1).strftime("%Y-%m"), **key
            )
            if month.year > 1970 or month.month > 1
            else None,
            following=url_for(
                "statistics", month=usage.add_months(month, 1).strftime("%Y-%m"), **key
            )
            if month < today.replace(day=1)
            else None,
        )
        response = Response(page, content_type=HTML)
        if config.counter_api_key:  # as the API's: no cache keeps a key holder's figures
            response.cache_control.no_store = True
            response.headers["Referrer-Policy"] = "no-referrer"  # the key is in this URL
        return response

    api = sushi.Api(
        store,
        config.archiveserviceibi,
        config.counter_api_key,
        config.stats_retention_days,
        describe=counter.describer(
            catalog.lookup, lambda ibi: persistent_url(config.resolver, ibi)
        ),
    )

    def counter_api(answer: Callable[[], tuple[int, Any]]) -> Response:
        # The COUNTER API's JSON; a refusal is its one Exception, never a 500.
        try:
            status, body = answer()
        except sushi.Refused as refused:
            status, body = refused.status, refused.body
        except stats.StatsError as exc:
            status, body = 503, sushi.exception(1000, str(exc))
        response = Response(json.dumps(body) + "\n", status=status)
        response.content_type = "application/json"
        if config.counter_api_key:  # a report for key holders only: no cache keeps it
            response.cache_control.no_store = True
        return response

    counter_path = service_path + "/r51"
    app.add_url_rule(counter_path + "/status", "counter_status", lambda: counter_api(api.status))
    app.add_url_rule(
        counter_path + "/reports",
        "counter_reports",
        lambda: counter_api(lambda: api.reports(request.args, url_for("counter_ir"))),
    )
    app.add_url_rule(
        counter_path + "/reports/ir",
        "counter_ir",
        lambda: counter_api(lambda: api.item_report(request.args)),
    )
    app.add_url_rule(
        counter_path + "/members",
        "counter_members",
        lambda: counter_api(lambda: api.members(request.args)),
    )

    def health_check() -> Response:
        status, body = health.check(catalog, live.store, config.state_dir, store, keys)
        response = Response(json.dumps(body, indent=1) + "\n", status=status)
        response.content_type = "application/json"
        response.cache_control.no_store = True
        return response

    # At the root, as SPEC has it, and under the service's path, which every deployment
    # forwards (contrib/).
    app.add_url_rule("/health", HEALTH[0], health_check)
    app.add_url_rule(service_path + "/health", HEALTH[1], health_check)

    app.register_blueprint(oai_blueprint(oai_provider(config, catalog, keys), service_path, links))
    context = landing.Context(catalog, config.resolver, links, used, licensed_to_user)
    app.register_blueprint(landing.blueprint(context), url_prefix=service_path)
    app.register_blueprint(sitemaps.blueprint(catalog, links, service_path))
    answer_unexpected_errors(app, log)

    pages_bounded = page_limit.of_archive(app.wsgi_app, config, service_path)
    app.wsgi_app = ArchiveRoot(
        ServiceEndpoint(pages_bounded, service_path, answer), (service_path, "/col")
    )
    return app


def create_app_from_env(*, refresh: bool = True) -> Flask:
    """For gunicorn, mod_wsgi and CGI: settings from ARCHIVE_SERVICE_CONFIG and the
    environment; `refresh` as for create_app (contrib's .cgi and .wsgi files pass False).

    The serving process follows the collection from its first request on (with gunicorn's
    --preload the app is made in the master, where no thread may start before the fork)."""
    app = create_app(settings.load(os.environ.get("ARCHIVE_SERVICE_CONFIG")), refresh=refresh)
    # A CGI process lives for one request: it reads the index as create_app left it.
    if not os.environ.get("GATEWAY_INTERFACE", "").startswith("CGI/"):
        app.wsgi_app = _Following(app.wsgi_app, app.extensions["archive_index"])
    return app
