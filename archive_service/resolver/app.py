"""The resolver's WSGI application: its own service (inclusion, exclusion) and persistent URLs.

`create_resolver_app(config)` builds it for `archive-service resolver serve`, for gunicorn
(`gunicorn 'archive_service.resolver.app:create_resolver_app_from_env()'`) and for tests.
The service answers at `/<resolveribi>`; every other path is a persistent URL.
"""

from __future__ import annotations

import ipaddress
import logging
import math
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import quote

from flask import Flask, Response, jsonify, redirect, render_template, request
from flask.logging import default_handler
from flask_babel import lazy_gettext

from .. import settings
from ..common import logs, pages
from ..common.http import TEXT, answer_unexpected_errors, error_response
from ..common.net import Network, client_address, forwarded
from ..protocol import landing, pairs
from ..protocol.answers import RequestError
from . import config as rconfig
from . import metrics
from . import purl as purlmod
from . import resolve as resolvemod
from .acknowledgments import Acknowledgments
from .answered import Answered
from .archives import ArchiveClient
from .conflicts import Conflicts
from .loops import OwnAddress, loop_reason
from .registry import Refused, Registry, Throttled

log = logging.getLogger(__name__)

_PATH_SAFE = "/!+:()@$,;=~*'-._"
UNKNOWN = ipaddress.ip_address("0.0.0.0")  # the user of clientinformation.ipaddress, unknown

# resolver/templates/, around the layout all the kit's pages share (see common/pages.py).
PAGE_SOURCES = pages.sources(Path(__file__).with_name("templates"), ("alert.html", "home.html"))

TITLES = {  # in the request's language when shown
    400: lazy_gettext("Not a persistent URL"),
    404: lazy_gettext("Information item not found"),
    409: lazy_gettext("Conflicting Archives"),
    502: lazy_gettext("No Archive answered"),
    503: lazy_gettext("No Archive available"),
    508: lazy_gettext("Resolution did not end"),
}


def client_ips(environ: Mapping[str, Any], trusted: Iterable[Network]) -> str:
    """`clientinformation.ipaddress` (Table 6.10): the user first, then the proxies, as
    `trusted_proxies` decides them (common/net.py: what a client writes in X-Forwarded-For
    is not read); 0.0.0.0 for a user unknown (an entry that is no IP address)."""
    found = forwarded(environ, trusted)
    return " ".join(str(a) for a in (found.user or UNKNOWN, *found.proxies))


def throttle_source(environ: Mapping[str, Any], trusted: Iterable[Network]) -> str:
    """Whom refused key checks are counted against (`KeyThrottle`): the user as
    `trusted_proxies` decides it."""
    return str(client_address(environ, trusted) or "unknown")


def create_resolver_app(config: settings.Config | Mapping[str, Any]) -> Flask:
    """Build the resolver app from validated settings (or a mapping of them)."""
    if not isinstance(config, settings.Config):
        config = rconfig.load(options=dict(config), environ={})
    config.require("state_dir")

    app = Flask(__name__)
    app.logger.removeHandler(default_handler)
    app.url_map.merge_slashes = False  # the path after the IBI is the item's, kept as is
    app.config["RESOLVER"] = config
    registry = Registry(config.state_dir, config.database)
    client = ArchiveClient(
        config.timeout, pool_size=max(32, 4 * config.threads), connections=config.threads
    )
    acknowledgments = Acknowledgments(client, config.ack_queue)
    answered = Answered(config.answered_ttl, config.database)
    conflicts = Conflicts()
    app.extensions["resolver"] = {
        "conflicts": conflicts,
        "registry": registry,
        "client": client,
        "acknowledgments": acknowledgments,
        "answered": answered,
    }
    # The switch of an alert links home: a persistent URL's query is the item's.
    pages.install(app, PAGE_SOURCES, home="home", foreign=("persistent",))
    service_path = "/" + config.resolveribi
    bind = config.bind if not config.bind.startswith("unix:") else "localhost"
    address = config.address or bind
    is_self = OwnAddress(config.bind, config.address)
    trusted = tuple(ipaddress.ip_network(n) for n in config.trusted_proxies)

    @app.before_request
    def refuse_loops() -> Response | None:
        """A request this resolver sent itself: answering it by resolving would ask again."""
        reason = loop_reason(request.headers.get("Via", ""), client.pseudonym)
        if reason:
            # The path as decoded: a client's %0a or %1b would be a line or an escape of ours.
            log.warning("%s %s: %s", request.method, logs.shown(request.path), reason)
            return error_response(reason, 508)
        return None

    @app.get(service_path, endpoint="service")
    def service() -> Response:
        try:
            query = pairs.parse_query(request.environ.get("QUERY_STRING", ""))
            answer = registry.handle(
                query, client.confirm, is_self, throttle_source(request.environ, trusted)
            )
        except (RequestError, pairs.PairsError) as exc:
            return error_response(str(exc))
        except Throttled as exc:
            response = error_response(str(exc), 429)
            response.headers["Retry-After"] = str(math.ceil(exc.retry_after))
            return response
        except Refused as exc:
            return error_response(str(exc), 403)
        return Response(pairs.render(answer), content_type=TEXT)

    def alert(status: int, reason: str, persistent: str, **kw) -> Response:
        # A file path's bytes that are not UTF-8 are surrogates in `reason` (names on disk
        # are bytes): shown as U+FFFD, where the page's encoding failed with a 500.
        reason = reason.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
        page = render_template(
            "alert.html",
            title=TITLES.get(status) or lazy_gettext("Not resolved"),
            reason=reason,
            persistent=persistent,
            suspects=kw.get("suspects", ()),
            silent=kw.get("silent", ()),
        )
        return Response(page, status=status, content_type="text/html; charset=utf-8")

    @app.get("/", endpoint="home")
    def home() -> Response:
        page = render_template(
            "home.html",
            base=f"http://{address}{request.script_root}",
            count=len(registry.included()),
            conflicts=conflicts.latest(),
        )
        return Response(page, content_type="text/html; charset=utf-8")

    @app.get("/health", endpoint="health")
    def health() -> Response:
        """For load balancers and admins: the registry answers; this worker's counts. An IBI
        has at least two segments, so no persistent URL is /health."""
        try:
            included = len(registry.included())
        except Exception as exc:  # the registry's database is down: this instance cannot resolve
            log.warning("health: registry %s: %s", registry.where, exc)
            return jsonify(status="failing", registry=str(exc)), 503
        return jsonify(
            status="ok",
            included=included,
            acknowledgments=acknowledgments.counts(),
            answered=answered.counts(),
            conflicts=conflicts.counts(),
        )

    @app.get("/<path:_rest>", endpoint="persistent")
    def persistent(_rest: str) -> Response:
        # Names on disk are bytes: read the raw PATH_INFO, not Werkzeug's decoding.
        raw = os.fsdecode(request.environ.get("PATH_INFO", "").encode("latin-1"))[1:]
        query = request.environ.get("QUERY_STRING", "")
        shown = quote(raw.encode("utf-8", "surrogateescape"), safe=_PATH_SAFE)
        persistent_url = f"http://{address}{request.script_root}/{shown}"
        if query:
            persistent_url += "?" + query
        try:
            purl = purlmod.parse(raw, query)
        except purlmod.PurlError as exc:
            return alert(400, str(exc), persistent_url)
        ips = client_ips(request.environ, trusted)
        via = request.headers.get("Via", "")

        def ask(question: resolvemod.Question, only=None, skip=(), enough=None, awaited=None):
            keyed = registry.included_keyed()
            if only is not None:  # the few remembered: not a pass over every Archive
                archives = [keyed[k] for k in sorted(only) if k in keyed and k not in skip]
            else:
                archives = [a for k, a in keyed.items() if k not in skip]
            params = question.params(ips, purl.filepath)
            request.environ[metrics.ASKED] = request.environ.get(metrics.ASKED, 0) + len(archives)
            return client.ask_all(archives, params, via, enough, awaited)

        outcome = resolvemod.resolve(
            purl, ask, request.headers.get("Accept-Language"), config.rounds, answered, conflicts
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
            return alert(
                outcome.status,
                outcome.reason,
                persistent_url,
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
        request.environ["archive_service.archive"] = chosen.serviceibi
        log.debug("%s -> %s from %s after %d round(s)", persistent_url, target, chosen, rounds)
        response = redirect(target, 302)
        response.vary.add("Accept")  # a BibTeX request goes elsewhere than a browser
        if request.method != "HEAD":  # a link checker's HEAD is no access to thank for
            thanks = resolvemod.acknowledgment(outcome.reading, ips, persistent_url)
            # Queued once the redirect has been written: a sender woken earlier would hold
            # the interpreter while this thread still answers the user.
            response.call_on_close(lambda: acknowledgments.put(chosen, thanks, via))
        return response

    answer_unexpected_errors(app, log)
    app.wsgi_app = metrics.metered(app.wsgi_app, config, service_path, registry)
    return app


def create_resolver_app_from_env() -> Flask:
    """For gunicorn: settings from ARCHIVE_SERVICE_RESOLVER_CONFIG and the environment."""
    return create_resolver_app(rconfig.load(os.environ.get("ARCHIVE_SERVICE_RESOLVER_CONFIG")))
