"""What the Archive's blueprints share, made once per app by create_app: the settings, the
index, the statistics store, and the few rules every route applies the same way (the request's
`Links`, who may see a licensed item, what COUNTER counts, the Signposting of a file).

Its pieces with no Flask in them are web/core.py's `Core`, all the service path (web/service.py)
needs. Each blueprint module (pages.py, files.py, counter_api.py, health.py) takes a `Site` and
gives a Blueprint, as landing.py, sitemaps.py and oai.py do with their contexts."""

from __future__ import annotations

from flask import Response, abort, request

from ..collection import items
from ..common import limits
from ..http_errors import error_response
from .core import Core

HTML = "text/html; charset=utf-8"
# The health check's endpoints (health.py): they answer when the index cannot be read.
HEALTH = ("health.health", "health.service_health")


class Site(Core):
    """The app's shared pieces (Core) and the rules of its Flask routes."""

    def item_or_404(self, directory: str) -> items.Item:
        item = self.catalog.item_at(directory)
        if item is None or item.state == "Deleted":
            abort(404)
        return item

    def licensed(self, item: items.Item) -> bool:
        return self.allows(item, request.environ)

    def signposted(self, response: Response, item: items.Item) -> Response:
        response.headers["Link"] = self.member_link(item, request.environ)
        return response

    def used(self, item: items.Item, kind: str) -> None:
        self.record_use(item, kind, request.environ)

    def start_request(self) -> Response | None:
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
            self.catalog.begin()
        return None
