"""The COUNTER API (COUNTER_SUSHI 5.1, sushi.py) at `/<archiveserviceibi>/r51/…`: status,
the reports offered, the Item Report and members, each a JSON answer. A Blueprint made per app
by `blueprint(site)`."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from flask import Blueprint, Response, request, url_for

from ..common.net import persistent_url
from ..stores import stats
from ..stores.stats import counter
from . import sushi
from .site import Site


def blueprint(site: Site) -> Blueprint:
    api_routes = Blueprint("counter_api", __name__)
    config = site.config
    api = sushi.Api(
        site.store,
        config.archiveserviceibi,
        config.counter_api_key,
        config.stats_retention_days,
        describe=counter.describer(
            site.catalog.lookup, lambda ibi: persistent_url(config.resolver, ibi)
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

    path = site.service_path + "/r51"
    api_routes.add_url_rule(path + "/status", "status", lambda: counter_api(api.status))
    api_routes.add_url_rule(
        path + "/reports",
        "reports",
        lambda: counter_api(lambda: api.reports(request.args, url_for("counter_api.ir"))),
    )
    api_routes.add_url_rule(
        path + "/reports/ir", "ir", lambda: counter_api(lambda: api.item_report(request.args))
    )
    api_routes.add_url_rule(
        path + "/members", "members", lambda: counter_api(lambda: api.members(request.args))
    )
    return api_routes
