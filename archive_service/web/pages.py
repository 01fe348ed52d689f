"""The Archive's own pages: what it is (at / and at the service's about page), its item list
and its statistics page, with the navigation every page shows. A Blueprint made per app by
`blueprint(site)`; the service path's route (`service_blueprint`), for what its plain WSGI
endpoint (web/service.py) leaves to Flask."""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta

from flask import Blueprint, Response, redirect, render_template, request, url_for
from flask_babel import gettext

from ..collection import items
from ..common import inclusion
from ..common.net import persistent_url
from ..http_errors import TEXT, error_response
from ..protocol.answers import Links
from ..stores import stats
from ..stores.stats import counter
from . import health, sushi, usage
from .site import HEALTH, HTML, Site

log = logging.getLogger(__name__)

STATISTICS_DAYS = 30  # what the statistics page counts


def blueprint(site: Site) -> Blueprint:
    pages = Blueprint("pages", __name__)
    _overview(pages, site)
    _item_list(pages, site)
    _statistics(pages, site)
    return pages


def service_blueprint(site: Site, answer) -> Blueprint:
    """The service path's route; `answer(environ)`: web/service.py's `Service.answer`."""
    routes = Blueprint("service", __name__)

    @routes.get(site.service_path, endpoint="service")
    def service() -> Response:
        # ServiceEndpoint answers GET and HEAD before Flask; the route gives the path
        # Flask's 405 and OPTIONS, and answers the same way should anything reach it. A
        # request with no query at all is a person who opened the service URL: the
        # Archive's page.
        if not request.environ.get("QUERY_STRING"):
            return redirect(url_for("pages.about"), 303)
        status, body = answer(request.environ)
        return Response(body, status=status, content_type=TEXT)

    return routes


def _overview(pages: Blueprint, site: Site) -> None:
    config, catalog = site.config, site.catalog

    @pages.app_context_processor
    def navigation() -> dict:
        # Paths from the mount point (url_for reads SCRIPT_NAME), on every page; the
        # Archive's page by its path under the service's, which every deployment forwards.
        return {
            "nav": [
                (gettext("The Archive"), url_for("pages.about")),
                (gettext("Items"), url_for("pages.items")),
                (gettext("Statistics"), url_for("pages.statistics")),
            ]
        }

    def overview() -> Response:
        # What the Archive is: one page at / and at the service's about page (its own item,
        # answers.service_item), whichever of the two a deployment forwards.
        links = site.links(request.environ)
        state = site.live.store
        refreshed = state.refreshed()
        page = render_template(
            "service.html",
            service=config.archiveserviceibi,
            url=links.service,
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
            problem_count=catalog.problem_count(),  # which and why name paths: for `check`
            list_url=url_for("pages.items"),
            statistics_url=url_for("pages.statistics"),
            health_url=url_for(HEALTH[1]),  # under the service path: every front forwards it
            oai_url=links.service + "/oai",  # baseURL: from archiveaddress
        )
        return Response(page, content_type=HTML)

    def _inclusion() -> dict | None:
        known = inclusion.read(config.state_dir)
        if known is None:
            return None
        return {"state": known.state, "since": health.iso(known.time)}

    pages.add_url_rule("/", "root", overview)
    pages.add_url_rule(site.service_path + "/about", "about", overview)


def _item_list(pages: Blueprint, site: Site) -> None:
    config, catalog = site.config, site.catalog

    @pages.get(site.service_path + "/items", endpoint="items")
    def item_list() -> Response:
        search = request.args.get("q", "")[:200]
        after, before = request.args.get("after", ""), request.args.get("before", "")
        found = catalog.page(after=after, before=before, search=search)
        if found is None:
            return Response(
                render_template(
                    "items.html",
                    archiveaddress=config.archiveaddress,
                    search=search,
                    list_url=url_for("pages.items"),
                    unavailable=gettext(
                        "The item list needs the index, which cannot be kept now (see /health)."
                    ),
                ),
                status=503,
                content_type=HTML,
            )
        links = site.links(request.environ)
        rows = [_row(item, links) for item in found.items]
        query = {"q": search} if search else {}
        after_url = url_for("pages.items", **query, after=found.after) if found.after else None
        before_url = url_for("pages.items", **query, before=found.before) if found.before else None
        page = render_template(
            "items.html",
            archiveaddress=config.archiveaddress,
            search=search,
            items=rows,
            list_url=url_for("pages.items"),
            next_url=after_url,
            previous_url=before_url,
        )
        return Response(page, content_type=HTML)

    def _row(item: items.Item, links: Links) -> dict:
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
            "filelist": None if deleted else links.filelist(item),
            "metadata": links.metadata(item, None) if dc and not deleted else None,
            "persistent": persistent_url(config.resolver, item.name.text),
        }


def _statistics(pages: Blueprint, site: Site) -> None:
    config, store = site.config, site.store
    figures = usage.Usage(store, config.archiveserviceibi)

    @pages.get(site.service_path + "/statistics", endpoint="statistics")
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
                report = figures.acknowledged(since, top=20)
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
            api=url_for("counter_api.ir"),
            # None in 1970-01: no use is before it, and the link led to a 400.
            previous=url_for(
                "pages.statistics", month=usage.add_months(month, -1).strftime("%Y-%m"), **key
            )
            if month.year > 1970 or month.month > 1
            else None,
            following=url_for(
                "pages.statistics", month=usage.add_months(month, 1).strftime("%Y-%m"), **key
            )
            if month < today.replace(day=1)
            else None,
        )
        response = Response(page, content_type=HTML)
        if config.counter_api_key:  # as the API's: no cache keeps a key holder's figures
            response.cache_control.no_store = True
            response.headers["Referrer-Policy"] = "no-referrer"  # the key is in this URL
        return response
