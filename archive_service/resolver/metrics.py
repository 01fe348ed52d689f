"""The resolver's Prometheus metrics (docs/metrics.md): what it counts, and the WSGI
middleware that counts requests and answers `GET /metrics` to `metrics_allow` only
(`Metered`). The mechanics both servers share are in common/metrics.py.

A resolution's outcome is its status; the Archives it asked are what app.py's `ask` leaves
in the request's environ (`ASKED`). Acknowledgments and conflicting claims are counted where
they happen (acknowledgments.py, conflicts.py); the registry's size is read when scraped."""

from __future__ import annotations

import logging

from .. import settings
from ..common import metrics
from ..common.metrics import Metric

log = logging.getLogger(__name__)

ASKED = "archive_service.asked"  # Archives asked so far by this request's resolution
OUTCOMES = {
    301: "redirected",
    302: "redirected",
    400: "not_a_persistent_url",
    404: "not_found",
    409: "conflict",
    502: "no_answer",
    503: "no_archive",
    508: "loop",
}
PAGES = frozenset(("/", "/health", "/favicon.ico", "/robots.txt"))

RESOLUTIONS = Metric(
    "Counter",
    "archive_service_resolver_resolutions",
    "Persistent URLs resolved, by outcome",
    ("outcome",),
)
ASKED_PER = Metric(
    "Histogram",
    "archive_service_resolver_archives_asked",
    "Archives asked per resolution (every round's)",
    buckets=(0, 1, 2, 3, 5, 10, 20, 50, 100, 250, 1000),
)
DURATION = Metric(
    "Histogram",
    "archive_service_resolver_request_duration_seconds",
    "Time to make a response, by endpoint kind (resolution, service, pages)",
    ("kind",),
    buckets=(0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
)
ACKNOWLEDGMENTS = Metric(
    "Counter",
    "archive_service_resolver_acknowledgments",
    "Acknowledgments to Archives by event: queued, sent, unexpected, retried, dropped",
    ("event",),
)
WAITING = Metric(
    "Gauge",
    "archive_service_resolver_acknowledgments_waiting",
    "Acknowledgments in the queues of the live workers",
    multiprocess_mode="livesum",
)
CONFLICTS = Metric(
    "Counter",
    "archive_service_resolver_conflicting_claims",
    "Claims of an Original refused (resolve.py settle_claims)",
)

OWN = (RESOLUTIONS, ASKED_PER, DURATION, ACKNOWLEDGMENTS, WAITING, CONFLICTS)


def acknowledgment(event: str) -> None:
    """Count one acknowledgment `event` (acknowledgments.py's calls)."""
    ACKNOWLEDGMENTS.labels(event).inc()


def waiting(change: int) -> None:
    WAITING.labels().inc(change)


def conflict() -> None:
    CONFLICTS.labels().inc()


def metered(app, config: settings.Config, service_path: str, registry):
    """`app` counted and with /metrics (`Metered`); `app` itself when `metrics_allow` is none."""
    return Metered(app, config, service_path, registry) if config.metrics_allow else app


class Metered(metrics.Metered):
    """Each request counted by kind (the service, the pages, a resolution), `GET /metrics`
    answered (not counted)."""

    own = OWN

    def __init__(self, app, config: settings.Config, service_path: str, registry):
        super().__init__(app, config, service_path)
        self.registry = registry

    def count(self, environ, path: str, status: int, headers: list, elapsed: float) -> None:
        if path == self.service_path:
            DURATION.labels("service").observe(elapsed)
        elif path in PAGES or path.startswith("/static/"):
            DURATION.labels("pages").observe(elapsed)
        else:
            DURATION.labels("resolution").observe(elapsed)
            RESOLUTIONS.labels(OUTCOMES.get(status, "error")).inc()
            ASKED_PER.labels().observe(environ.get(ASKED, 0))

    def live(self) -> list:
        try:
            included = {(): len(self.registry.included())}
        except Exception as exc:  # the registry's database is down: /health says so
            log.warning("metrics: registry %s: %s", self.registry.where, exc)
            included = {}
        return [
            metrics.gauge(
                "archive_service_resolver_registry_archives", "Archives included", included
            )
        ]
