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

from flask import Flask, Response, jsonify, render_template, request
from flask.logging import default_handler
from flask_babel import lazy_gettext

from .. import settings
from ..common import pages
from ..common.net import Network, client_address
from ..http_errors import TEXT, answer_unexpected_errors, error_response
from ..protocol import pairs
from ..protocol.answers import RequestError
from . import config as rconfig
from . import metrics
from .acknowledgments import Acknowledgments
from .answered import Answered
from .archives import ArchiveClient
from .conflicts import Conflicts
from .loops import OwnAddress, loop_reason
from .redirects import RESOLVED, RedirectEndpoint, Resolutions, client_ips
from .registry import Refused, Registry, Throttled

log = logging.getLogger(__name__)

__all__ = ["client_ips", "create_resolver_app", "create_resolver_app_from_env"]

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
            log.warning("%s %s: %s", request.method, request.path, reason)
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

    resolutions = Resolutions(
        config, registry, client, answered, conflicts, acknowledgments, address, trusted
    )

    @app.get("/<path:_rest>", endpoint="persistent")
    def persistent(_rest: str) -> Response:
        resolved = request.environ.pop(RESOLVED, None) or resolutions.resolve(request)
        if isinstance(resolved, Exception):
            raise resolved
        if resolved.target is None:
            return alert(
                resolved.status,
                resolved.reason,
                resolved.persistent_url,
                suspects=resolved.suspects,
                silent=resolved.silent,
            )
        return resolutions.redirect_response(resolved, request)

    answer_unexpected_errors(app, log)
    app.wsgi_app = RedirectEndpoint(
        app.wsgi_app, resolutions, ("/", "/health", service_path), client.pseudonym
    )
    app.wsgi_app = metrics.metered(app.wsgi_app, config, service_path, registry)
    return app


def create_resolver_app_from_env() -> Flask:
    """For gunicorn: settings from ARCHIVE_SERVICE_RESOLVER_CONFIG and the environment."""
    return create_resolver_app(rconfig.load(os.environ.get("ARCHIVE_SERVICE_RESOLVER_CONFIG")))
