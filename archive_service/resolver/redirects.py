"""A persistent URL resolved (`Resolutions.resolve`), and its hot path outside Flask
(`RedirectEndpoint`, issue 35).

A resolution that ends in a redirect is most of a resolver's work. Flask's request context,
routing, hooks and response handling cost it about as much as the resolver's own path, so
GET and HEAD of a persistent URL with no query are resolved before Flask and their redirect
written with no response object (`written_redirect`: Werkzeug's `redirect` page, the headers
of the pages' after-request hook included). Anything else (an alert, a query, a loop, another
route, another method) goes on to Flask, which answers from the resolution already made
(`RESOLVED` in the WSGI environ); a redirect there is the same `written_redirect`, as a WSGI
application (`redirect_app`), so that the redirect is written in one place."""

from __future__ import annotations

import functools
import ipaddress
import logging
import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

from markupsafe import escape
from werkzeug.urls import iri_to_uri
from werkzeug.wrappers import Request

from ..common import i18n
from ..common.net import Network, forwarded
from ..protocol import landing
from . import metrics
from . import purl as purlmod
from . import resolve as resolvemod
from .acknowledgments import Acknowledgments
from .answered import Answered
from .archives import ArchiveClient
from .conflicts import Conflicts
from .loops import loop_reason
from .registry import Registry

log = logging.getLogger(__name__)

_PATH_SAFE = "/!+:()@$,;=~*'-._"
UNKNOWN = ipaddress.ip_address("0.0.0.0")  # the user of clientinformation.ipaddress, unknown
# The environ key of a resolution made before Flask (a Resolved, or the exception it raised).
RESOLVED = "archive_service.resolved"


def client_ips(environ: Mapping[str, Any], trusted: Iterable[Network]) -> str:
    """`clientinformation.ipaddress` (Table 6.10): the user first, then the proxies, as
    `trusted_proxies` decides them (common/net.py: what a client writes in X-Forwarded-For
    is not read); 0.0.0.0 for a user unknown (an entry that is no IP address)."""
    found = forwarded(environ, trusted)
    return " ".join(str(a) for a in (found.user or UNKNOWN, *found.proxies))


@dataclass
class Resolved:
    """What a persistent URL resolved to: `target` (redirect there, then `acknowledge`), or
    an alert's status, reason and Archives."""

    persistent_url: str
    status: int = 302
    reason: str = ""
    target: str | None = None
    acknowledge: Callable[[], None] = lambda: None
    suspects: tuple = field(default=())
    silent: tuple = field(default=())


@dataclass
class Resolutions:
    """A resolver's parts a resolution needs; `resolve(request)` (Flask's, or a Werkzeug
    request read outside it)."""

    config: Any
    registry: Registry
    client: ArchiveClient
    answered: Answered
    conflicts: Conflicts
    acknowledgments: Acknowledgments
    address: str
    trusted: tuple

    def resolve(self, request: Request) -> Resolved:
        environ = request.environ
        # Names on disk are bytes: read the raw PATH_INFO, not Werkzeug's decoding.
        raw = os.fsdecode(environ.get("PATH_INFO", "").encode("latin-1"))[1:]
        query = environ.get("QUERY_STRING", "")
        shown = quote(raw.encode("utf-8", "surrogateescape"), safe=_PATH_SAFE)
        persistent_url = f"http://{self.address}{request.script_root}/{shown}"
        if query:
            persistent_url += "?" + query
        try:
            purl = purlmod.parsed(raw, query)
        except purlmod.PurlError as exc:
            return Resolved(persistent_url, 400, str(exc))
        ips = client_ips(environ, self.trusted)
        via = request.headers.get("Via", "")
        registry, client = self.registry, self.client
        # Read once a resolution, for its rounds and its owner: with PostgreSQL each read is
        # a round trip.
        included = functools.cache(registry.included_keyed)

        def ask(question: resolvemod.Question, only=None, skip=(), enough=None, awaited=None):
            keyed = included()
            if only is not None:  # the few remembered: not a pass over every Archive
                archives = [keyed[k] for k in sorted(only) if k in keyed and k not in skip]
            else:
                archives = [a for k, a in keyed.items() if k not in skip]
            params = question.params(ips, purl.filepath)
            environ[metrics.ASKED] = environ.get(metrics.ASKED, 0) + len(archives)
            return client.ask_all(archives, params, via, enough, awaited)

        outcome = resolvemod.resolve(
            purl,
            ask,
            request.headers.get("Accept-Language"),
            self.config.rounds,
            self.answered,
            self.conflicts,
            lambda key: key in included() or registry.lately_excluded(key),
        )
        rounds = len(outcome.questions)
        if outcome.url is None:
            log.info(
                "%s: %d after %d round(s): %s",
                persistent_url,
                outcome.status,
                rounds,
                outcome.reason,
            )
            return Resolved(
                persistent_url,
                outcome.status,
                outcome.reason,
                suspects=outcome.suspects,
                silent=outcome.silent,
            )
        chosen = outcome.reading.answer.archive
        target = outcome.url
        if purl.passthrough:  # the item's own query pairs (a web service's parameters)
            target += ("&" if "?" in target else "?") + purl.passthrough
        if landing.wants_description(list(request.accept_mimetypes)):
            # BibTeX, CSL JSON …: the item's landing page at its Archive negotiates them.
            match = outcome.reading.match
            item = (resolvemod.first_form(match.ibi) if match and match.ibi else None) or (
                outcome.questions[-1].ibi
            )
            target = landing.landing_url(chosen.address, chosen.serviceibi, item)
        # The access log shows where the user went (Location) and the Archive (server.py):
        # a second line per resolution cost 6 % of the resolver's CPU.
        environ["archive_service.archive"] = chosen.serviceibi
        log.debug("%s -> %s from %s after %d round(s)", persistent_url, target, chosen, rounds)
        thanks = resolvemod.acknowledgment(outcome.reading, ips, persistent_url)
        acknowledgments = self.acknowledgments
        return Resolved(
            persistent_url,
            target=target,
            acknowledge=lambda: acknowledgments.put(chosen, thanks, via),
        )


class RedirectEndpoint:
    """WSGI middleware: GET and HEAD of a persistent URL with no query, resolved before Flask;
    a redirect written here, anything else handed on to Flask with the resolution."""

    def __init__(self, app, resolutions: Resolutions, own_paths: Iterable[str], pseudonym: str):
        self.app = app
        self.resolutions = resolutions
        self.own_paths = frozenset(own_paths)  # Flask's other routes
        self.pseudonym = pseudonym

    def __call__(self, environ, start_response):
        path = environ.get("PATH_INFO", "")
        if (
            environ.get("REQUEST_METHOD") not in ("GET", "HEAD")
            or environ.get("QUERY_STRING")  # ?lang= sets a cookie; `??`, `?info`: rarer
            or path in self.own_paths
            or path.startswith("/static/")
            or path.count("/") < 2  # an IBI has two segments at least
            or loop_reason(environ.get("HTTP_VIA", ""), self.pseudonym)  # Flask says why
        ):
            return self.app(environ, start_response)
        request = Request(environ)
        try:
            resolved = self.resolutions.resolve(request)
        except Exception as exc:  # noqa: BLE001 - Flask's handler answers it (a 500 page)
            resolved = exc
        if isinstance(resolved, Exception) or resolved.target is None:
            environ[RESOLVED] = resolved  # an alert is a page: Flask's
            return self.app(environ, start_response)
        return written_redirect(resolved, request, start_response)


def redirect_app(resolved: Resolved):
    """`written_redirect` as a WSGI application: what Flask's route returns (Flask runs it
    and adds its hooks' headers; tests/test_resolver_redirects.py holds both routes' answers
    alike, byte for byte)."""

    def app(environ, start_response) -> Iterable[bytes]:
        return written_redirect(resolved, Request(environ), start_response)

    return app


def written_redirect(resolved: Resolved, request: Request, start_response) -> Iterable[bytes]:
    """The redirect to `resolved.target` with the pages' language headers, written straight
    to WSGI (the page and fields of Werkzeug's `redirect`), acknowledged once written; without
    Werkzeug's response object, headers and iterator: about a tenth of the resolver's
    interpreter time a resolution (issue 35). `Vary: Accept`: a BibTeX request goes elsewhere
    than a browser."""
    shown = escape(resolved.target)
    body = (
        "<!doctype html>\n"
        "<html lang=en>\n"
        "<title>Redirecting...</title>\n"
        "<h1>Redirecting...</h1>\n"
        "<p>You should be redirected automatically to the target URL: "
        f'<a href="{shown}">{shown}</a>. If not, click the link.\n'
    ).encode()
    start_response(
        "302 FOUND",
        [
            ("Content-Type", "text/html; charset=utf-8"),
            ("Content-Length", str(len(body))),
            ("Location", iri_to_uri(resolved.target)),
            ("Vary", ", ".join(("Accept", *i18n.LANGUAGE_VARY))),
            ("Content-Language", i18n.page_language(request)),
        ],
    )
    if request.method == "HEAD":  # a link checker's HEAD is no access to thank for
        return []
    return _Written(body, resolved.acknowledge)


class _Written:
    """A redirect's body, acknowledged once the server has written it (its `close`): a
    sender woken earlier would hold the interpreter while this thread still answers the user."""

    __slots__ = ("body", "then")

    def __init__(self, body: bytes, then: Callable[[], None]):
        self.body, self.then = body, then

    def __iter__(self):
        yield self.body

    def close(self) -> None:
        self.then()
