"""The resolver's routes, as two Blueprints over the parts `create_resolver_app` makes: its
service (`/<resolveribi>`: inclusion and exclusion) with `/health`, and its pages (home, the
alert of a persistent URL not resolved, which is every other path).

A persistent URL that ends in a redirect is answered before Flask (resolver/redirects.py
`RedirectEndpoint`); the `persistent` route here takes the resolution it left, or resolves."""

from __future__ import annotations

import logging
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from flask import Blueprint, Response, jsonify, render_template, request
from flask_babel import lazy_gettext

from .. import settings
from ..common import logs
from ..common.net import Network, client_address
from ..http_errors import TEXT, error_response
from ..protocol import pairs
from ..protocol.answers import RequestError
from .acknowledgments import Acknowledgments
from .answered import Answered
from .archives import ArchiveClient
from .conflicts import Conflicts
from .loops import OwnAddress, loop_reason
from .redirects import RESOLVED, Resolutions, redirect_app
from .registry import Refused, Registry, Throttled

log = logging.getLogger("archive_service.resolver.app")  # the name its lines always had

TITLES = {  # in the request's language when shown
    400: lazy_gettext("Not a persistent URL"),
    404: lazy_gettext("Information item not found"),
    409: lazy_gettext("Conflicting Archives"),
    502: lazy_gettext("No Archive answered"),
    503: lazy_gettext("No Archive available"),
    508: lazy_gettext("Resolution did not end"),
}
HTML = "text/html; charset=utf-8"


@dataclass(frozen=True)
class Parts:
    """What the routes share, made once per app."""

    config: settings.Config
    registry: Registry
    client: ArchiveClient
    acknowledgments: Acknowledgments
    answered: Answered
    conflicts: Conflicts
    resolutions: Resolutions
    address: str  # the resolver's own, for the persistent URLs its pages show
    trusted: tuple[Network, ...]
    is_self: OwnAddress

    @property
    def service_path(self) -> str:
        return "/" + self.config.resolveribi


def throttle_source(environ: Mapping[str, Any], trusted: Iterable[Network]) -> str:
    """Whom refused key checks are counted against (`KeyThrottle`): the user as
    `trusted_proxies` decides it."""
    return str(client_address(environ, trusted) or "unknown")


def service_blueprint(parts: Parts) -> Blueprint:
    """`/<resolveribi>` (the resolver's service: inclusionRequest, exclusionRequest) and
    `/health`; with the refusal of a request this resolver sent itself, for every route."""
    routes = Blueprint("service", __name__)
    registry, client = parts.registry, parts.client

    @routes.before_app_request
    def refuse_loops() -> Response | None:
        """A request this resolver sent itself: answering it by resolving would ask again."""
        reason = loop_reason(request.headers.get("Via", ""), client.pseudonym)
        if reason:
            # The path as decoded: a client's %0a or %1b would be a line or an escape of ours.
            log.warning("%s %s: %s", request.method, logs.shown(request.path), reason)
            return error_response(reason, 508)
        return None

    @routes.get(parts.service_path, endpoint="service")
    def service() -> Response:
        try:
            query = pairs.parse_query(request.environ.get("QUERY_STRING", ""))
            source = throttle_source(request.environ, parts.trusted)
            answer = registry.handle(query, client.confirm, parts.is_self, source)
        except (RequestError, pairs.PairsError) as exc:
            return error_response(str(exc))
        except Throttled as exc:
            response = error_response(str(exc), 429)
            response.headers["Retry-After"] = str(math.ceil(exc.retry_after))
            return response
        except Refused as exc:
            return error_response(str(exc), 403)
        return Response(pairs.render(answer), content_type=TEXT)

    @routes.get("/health", endpoint="health")
    def health() -> Response:
        """For load balancers and admins: the registry answers; this worker's counts. An IBI
        has at least two segments, so no persistent URL is /health."""
        try:
            included = len(registry.included())
        except Exception as exc:  # the registry's database is down: this instance cannot resolve
            log.warning("health: registry %s: %s", registry.where, exc)
            # public: the state, not the error (PostgreSQL's names its host)
            return jsonify(status="failing", registry="unavailable"), 503
        return jsonify(
            status="ok",
            included=included,
            acknowledgments=parts.acknowledgments.counts(),
            answered=parts.answered.counts(),
            conflicts=parts.conflicts.counts(),
        )

    return routes


def alert(status: int, reason: str, persistent: str, **kw) -> Response:
    """The page of a persistent URL not resolved."""
    # A file path's bytes that are not UTF-8 are surrogates in `reason` (names on disk are
    # bytes): shown as U+FFFD, where the page's encoding failed with a 500.
    reason = reason.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
    page = render_template(
        "alert.html",
        title=TITLES.get(status) or lazy_gettext("Not resolved"),
        reason=reason,
        persistent=persistent,
        suspects=kw.get("suspects", ()),
        silent=kw.get("silent", ()),
    )
    return Response(page, status=status, content_type=HTML)


def pages_blueprint(parts: Parts) -> Blueprint:
    """The home page and every other path as a persistent URL."""
    routes = Blueprint("pages", __name__)

    @routes.get("/", endpoint="home")
    def home() -> Response:
        page = render_template(
            "home.html",
            base=f"http://{parts.address}{request.script_root}",
            count=len(parts.registry.included()),
            conflicts=parts.conflicts.latest(),
        )
        return Response(page, content_type=HTML)

    @routes.get("/<path:_rest>", endpoint="persistent")
    def persistent(_rest: str):
        resolutions = parts.resolutions
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
        return redirect_app(resolved)  # the hot path's writer (redirects.py), not a copy

    return routes
