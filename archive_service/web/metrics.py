"""The Archive's Prometheus metrics (docs/metrics.md): what it counts and the WSGI middleware
that counts requests and answers `GET /metrics` to `metrics_allow` only (`Metered`), no Flask
(the statistics store counts its uses: stores/stats USES). The mechanics both servers share are in
common/metrics.py.

Requests are counted around the app, not in it: the service path's subject and outcome come
from the request's environ, where the service endpoint leaves them (`SUBJECT`,
`ACKNOWLEDGED`), so protocol/ knows nothing of metrics. A duration is the time to make the
response (for a /col/ file: to open and describe it, not to send it, which is the client's
pace). The gauges are read when scraped, from what /health computes (web/health.py)."""

from __future__ import annotations

from collections.abc import Callable

from .. import settings
from ..common import metrics
from ..common.metrics import Metric
from ..index.catalog import READ_ERRORS
from ..stores.stats import USES

SUBJECT = "archive_service.subject"  # the service path's servicesubject, set by its endpoint
ACKNOWLEDGED = "archive_service.acknowledged"  # what stores/stats made of an acknowledgment
# Label values are bounded: a client's made-up subject is `other`, never a label of its own.
SUBJECTS = frozenset(("urlRequest", "acknowledgment", "inclusionConfirmationRequest"))
KEY_REFUSALS = frozenset(("malformed", "future", "expired", "forged", "unknown"))

REQUESTS = Metric(
    "Counter",
    "archive_service_protocol_requests",
    "Requests at the service path by servicesubject and outcome",
    ("servicesubject", "outcome"),
)
ACKNOWLEDGMENTS = Metric(
    "Counter",
    "archive_service_acknowledgments",
    "Acknowledgments by result: counted, or refused by reason (stores/stats REASONS)",
    ("result",),
)
DOWNLOADS = Metric(
    "Counter",
    "archive_service_col_downloads",
    "Files served under /col/ (GET, 200 or 206), by who sent the bytes",
    ("sent_by",),
)
BYTES = Metric("Counter", "archive_service_col_bytes", "Bytes of the /col/ files this process sent")
DURATION = Metric(
    "Histogram",
    "archive_service_request_duration_seconds",
    "Time to make a response, by endpoint kind (service, col, pages)",
    ("kind",),
    buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
)

OWN = (REQUESTS, ACKNOWLEDGMENTS, DOWNLOADS, BYTES, USES, DURATION)


def enabled(config: settings.Config) -> bool:
    return bool(config.metrics_allow)


def outcome(status: int, acknowledged: str | None) -> str:
    """A service request's outcome: answered, error, refused_key, refused_sender, replay."""
    if status != 200:
        return "error"
    if acknowledged in KEY_REFUSALS:
        return "refused_key"
    if acknowledged == "not-resolver":
        return "refused_sender"
    return "replay" if acknowledged == "replay" else "answered"


def metered(app, config: settings.Config, service_path: str, health, catalog):
    """`app` counted and with /metrics (`Metered`); `app` itself when `metrics_allow` is none."""
    return Metered(app, config, service_path, health, catalog) if enabled(config) else app


class Metered(metrics.Metered):
    """Inside ArchiveRoot (PATH_INFO is the Archive's own): each request counted by endpoint
    kind, `GET /metrics` answered (not counted). `health`: web/health.py's check of this app;
    `catalog`: its index (items by state)."""

    own = OWN

    def __init__(self, app, config: settings.Config, service_path: str, health, catalog):
        super().__init__(app, config, service_path)
        self.health, self.catalog = health, catalog

    def count(self, environ, path: str, status: int, headers: list, elapsed: float) -> None:
        if path == self.service_path and environ.get("QUERY_STRING"):
            DURATION.labels("service").observe(elapsed)
            subject = environ.get(SUBJECT)
            acknowledged = environ.get(ACKNOWLEDGED)
            REQUESTS.labels(
                subject if subject in SUBJECTS else "other", outcome(status, acknowledged)
            ).inc()
            if acknowledged is not None:
                ACKNOWLEDGMENTS.labels(acknowledged).inc()
        elif path.startswith("/col/"):
            DURATION.labels("col").observe(elapsed)
            if status in (200, 206) and environ.get("REQUEST_METHOD") == "GET":
                _downloaded(headers)
        else:
            DURATION.labels("pages").observe(elapsed)

    def live(self) -> list:
        return _live(self.health, self.catalog)

    def scrape(self, environ, start_response):
        self.catalog.begin()  # one snapshot of the index, as a request's
        try:
            return super().scrape(environ, start_response)
        finally:
            self.catalog.end()


def _downloaded(headers: list[tuple[str, str]]) -> None:
    names = {name.lower(): value for name, value in headers}
    if "x-accel-redirect" in names or "x-sendfile" in names:
        DOWNLOADS.labels("proxy").inc()  # the front server sends it: its size is not ours
        return
    DOWNLOADS.labels("archive").inc()
    length = names.get("content-length", "")
    if length.isdigit():
        BYTES.labels().inc(int(length))


def _live(health: Callable[[], tuple[int, dict]], catalog) -> list:
    """The gauges of the moment, from /health's own figures."""
    status, body = health()
    index, inclusion = body["index"], body["inclusion"]
    by_state: dict[tuple[str], float] = {}
    try:
        for (state, _contenttype), n in catalog.kinds().items():
            by_state[(state,)] = by_state.get((state,), 0) + n
    except READ_ERRORS:  # an index that cannot be read: /health says so (healthy 0)
        pass
    indexer = (index["indexer"] or "").split(" ")[0]  # "watching since …"
    age = index["age_seconds"]
    g = metrics.gauge
    return [
        g("archive_service_healthy", "1 when /health says ok", {(): int(status == 200)}),
        g("archive_service_index_items", "Readable items by state", by_state, ("state",)),
        g(
            "archive_service_index_age_seconds",
            "Seconds since the index was last brought up to date",
            {(): age} if age is not None else {},
        ),
        g(
            "archive_service_indexer",
            "1 for what the indexer last said it does: watching, polling, stopped",
            {(indexer,): 1} if indexer else {},
            ("mode",),
        ),
        g(
            "archive_service_inclusion",
            "1 for the last known inclusion state in the resolver",
            {(inclusion["state"],): 1} if inclusion else {},
            ("state",),
        ),
        g(
            "archive_service_state_dir_writable",
            "1 when the state directory takes writes",
            {(): int(body["state_dir"]["writable"])},
        ),
    ]
