"""The service itself (MontarResposta, SPEC §4) at `/<archiveserviceibi>`, with no web framework:
a plain WSGI endpoint in front of Flask (`ServiceEndpoint`) answers GET and HEAD with a query,
pages.py's service route the rest (405, OPTIONS, a browser's visit); `ArchiveRoot` moves a
mount point at the service's path or /col back into PATH_INFO. create_app mounts it before its
Flask app; contrib's CGI program runs it alone for a protocol request (web/cgi.py), so that
such a process imports neither Flask, Jinja nor Werkzeug (issue 35)."""

from __future__ import annotations

import logging
from functools import cached_property
from http import HTTPStatus

from ..common import limits
from ..common.logs import shown
from ..common.net import HostNetworks, client_address
from ..protocol import answers, pairs
from ..protocol.answers import Links, RequestError
from ..protocol.errors import error_body
from ..protocol.pairs import TEXT
from ..stores import stats
from ..stores.stats import counter
from . import metrics
from .acknowledgers import acknowledgers
from .core import Core

log = logging.getLogger(__name__)


def _served_here(url: str, site: Links) -> bool:
    """Whether this app serves `url` itself (a /col/ file or a page), so that it sees the use
    when the user fetches it: not a file published by another server at `url_base`."""
    if url.startswith(site.files + "/"):
        return site.files == site.site + "/col"  # else url_base: another server's
    return url.startswith(site.site + "/")


class ArchiveRoot:
    """WSGI middleware: the app's routes are relative to the Archive's root, yet a server may
    mount it at the root, at `/<archiveserviceibi>` (mod_wsgi's WSGIScriptAlias, a proxy that
    sets SCRIPT_NAME) or at `/col`. A mount point ending in one of those is moved back from
    SCRIPT_NAME into PATH_INFO, so every route, and every URL built from script_root, is right."""

    def __init__(self, app, mounts: tuple[str, ...]):
        self.app = app
        self.mounts = mounts

    def __call__(self, environ, start_response):
        script = environ.get("SCRIPT_NAME")
        if script:  # mounted at the root (serve, a plain gunicorn) there is nothing to move
            script = script.rstrip("/")
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

    def takes(self, environ) -> bool:
        """Whether the request is one this endpoint answers (a protocol request)."""
        return (
            environ.get("PATH_INFO") == self.path
            and environ.get("REQUEST_METHOD") in ("GET", "HEAD")
            and bool(environ.get("QUERY_STRING"))  # else a browser, not a resolver: Flask redirects
        )

    def __call__(self, environ, start_response):
        if not self.takes(environ):
            return self.app(environ, start_response)
        status, body = self.answer(environ)
        start_response(
            self.STATUS[status], [("Content-Type", TEXT), ("Content-Length", str(len(body)))]
        )
        return [] if environ.get("REQUEST_METHOD") == "HEAD" else [body]


class Service:
    """The answers of one Archive's service: `answer(environ)` for ServiceEndpoint and for
    pages.py's route, what reaches Flask."""

    def __init__(self, site: Core, *, one_request: bool = False):
        self.site = site
        if not one_request:  # a CGI process's request may need none of it
            self.senders = acknowledgers(site.config)

    @cached_property
    def senders(self) -> HostNetworks:
        """Whose acknowledgments count (resolver_networks). A long-lived app looks the
        resolver host up when made, never on a request's path; a process made for
        `one_request` (CGI) only when that request is an acknowledgment."""
        return acknowledgers(self.site.config)

    def answer(self, environ) -> tuple[int, bytes]:
        """The service (MontarResposta) for one WSGI request: its status and pairs body."""
        site = self.site
        try:
            problem = limits.problem(environ)
            if problem:
                return 400, error_body(problem).encode()
            site.catalog.begin()
            try:
                query = pairs.parse_query(environ.get("QUERY_STRING", ""))
                environ[metrics.SUBJECT] = query.get("servicesubject")
                links = site.links(environ)
                body = answers.monta_resposta(query, site.archive, links)
                if query["servicesubject"] == "acknowledgment":
                    ack = self.acknowledgment(query, links, environ)
                    environ[metrics.ACKNOWLEDGED] = site.store.acknowledge(ack, site.keys)
                return 200, body.encode("ascii")
            finally:
                site.catalog.end()
        except (RequestError, pairs.PairsError) as exc:
            return 400, error_body(str(exc)).encode()
        except Exception:
            log.exception("unexpected error on %s", shown(environ.get("PATH_INFO", "")))
            return 500, error_body("internal error").encode()

    def acknowledgment(self, query: dict[str, str], links: Links, environ) -> stats.Acknowledgment:
        # Counted under the item its URL names, with that item's state and the contenttype
        # the answer gave the URL; the claimed `ibi`, `contenttype` and `state` are ignored.
        named = self.site.archive.item_of_url(query["url"], links, query.get("ibi"))
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
            served_here=_served_here(query["url"], links),
            from_resolver=(sender := client_address(environ, self.site.trusted)) is not None
            and sender in self.senders,
        )
