"""`GET /health`: whether this Archive can answer, as JSON for load balancers and monitoring.

It can answer (200) when its index reads and is not damaged, its state directory takes
writes (the URL-key secret and the statistics live there: without it acknowledgments are
not counted) and its indexer is not being restarted again and again (follower.restarting);
else 503, with each problem in one line. The index's freshness and the
inclusion in the resolver are reported, not judged: a stale index still answers, and an
Archive not (yet) included still serves its files.

It is public: it says states and counts, never a path, a process id or a link target (those
are in the logs and in `archive-service check`)."""

from __future__ import annotations

import json
import os
import tempfile
import time
from datetime import UTC, datetime
from typing import Any

from flask import Blueprint, Response

from ..common import inclusion
from ..index.catalog import READ_ERRORS
from ..index.store import Store
from ..indexer import follower
from ..protocol.urlkeys import UrlKeys
from ..stores import stats
from .site import Site


def iso(seconds: float | None) -> str | None:
    """A time for people and JSON: ISO 8601 in UTC, to the second."""
    if not seconds:
        return None
    return datetime.fromtimestamp(seconds, UTC).isoformat(timespec="seconds")


def write_problem(directory: str | os.PathLike, what: str) -> str | None:
    """Why a file cannot be created in `directory` (`what` it is) now, or None: a real write
    (permission bits say nothing to root, and a file system remounted read-only keeps them)."""
    try:
        with tempfile.TemporaryFile(dir=directory, prefix=".health-"):
            return None
    except OSError as exc:
        return f"cannot write in {what}: {exc.strerror or type(exc).__name__}"


def indexer_state(store: Store, *, process: bool = False) -> str | None:
    """What the indexer last wrote of itself (`<pid> watching|polling|stopped <time>`), for
    people: 'watching since …'; its process id for the operator only (`process`)."""
    note = store.meta().get("indexer", "")
    parts = note.split(" ")
    if len(parts) != 3 or not parts[2].isdigit():
        return None
    said = f"{parts[1]} since {iso(float(parts[2]))}"
    return f"{said} (process {parts[0]})" if process else said


def check(
    catalog, store: Store, state_dir: str, counts: stats.Store, keys: UrlKeys
) -> tuple[int, dict[str, Any]]:
    """(HTTP status, JSON body) of the health check, read inside a request (catalog.begin)."""
    problems: list[str] = []
    items = None
    try:
        items = catalog.count()
    except READ_ERRORS as exc:
        problems.append(f"the index cannot be read: {exc}")
    damage = store.reported_damage()
    if damage:
        problems.append(f"the index is damaged ({damage}); it is being rebuilt")
    if (why := follower.restarting(store)) is not None:
        problems.append(why)
    refreshed = store.refreshed()
    writable = True
    # The state directory's name wins when the index lives in it.
    places = {str(store.path.parent): "the index's directory", state_dir: "the state directory"}
    for directory, what in places.items():
        if (why := write_problem(directory, what)) is not None:
            problems.append(why)
            writable = False
    # Their own texts name where (a path, the database): the logs have them.
    if counts.problem:
        problems.append("acknowledgments are not counted now: the statistics cannot be written")
    if keys.problem:
        problems.append(
            "the URL-key secret cannot be kept: keys issued now may not verify after a "
            "restart or on another node"
        )
    included = inclusion.read(state_dir)
    body = {
        "status": "failing" if problems else "ok",
        "problems": problems,
        "index": {
            "items": items,
            "complete": store.is_complete(),
            "damaged": damage,
            "refreshed": iso(refreshed),
            "age_seconds": round(time.time() - refreshed, 1) if refreshed else None,
            "indexer": indexer_state(store),
        },
        "state_dir": {"writable": writable},
        "inclusion": public_inclusion(included),
    }
    return (503 if problems else 200), body


def of_site(site: Site) -> tuple[int, dict]:
    """`check` of the Archive `site` serves (the health pages, the metrics' gauges)."""
    return check(site.catalog, site.live.store, site.config.state_dir, site.store, site.keys)


def blueprint(site: Site) -> Blueprint:
    """The check at the root, as SPEC has it, and under the service's path, which every
    deployment forwards (contrib/); site.HEALTH names their endpoints."""
    routes = Blueprint("health", __name__)

    def health_check() -> Response:
        status, body = of_site(site)
        response = Response(json.dumps(body, indent=1) + "\n", status=status)
        response.content_type = "application/json"
        response.cache_control.no_store = True
        return response

    routes.add_url_rule("/health", "health", health_check)
    routes.add_url_rule(site.service_path + "/health", "service_health", health_check)
    return routes


def public_inclusion(included: inclusion.Inclusion | None) -> dict | None:
    """The announcer's last word without its `detail`: that text is for the log and `check`
    (it names the socket it waits for, or the database user and host that broke)."""
    if included is None:
        return None
    return {"state": included.state, "resolver": included.resolver, "time": iso(included.time)}
