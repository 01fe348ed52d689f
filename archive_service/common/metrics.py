"""Prometheus metrics, what both servers share: the counters' directory under gunicorn, the
metrics as declared (`Metric`, made on first use), who may read them (`allowed`) and the
text a scrape gets (`exposition`). No web framework.

Under `serve` and `resolver serve` the figures add up over gunicorn's workers through
prometheus_client's multiprocess mode: `use_directory` (the master, before the app is made
and the workers fork) makes the directory empty and names it in PROMETHEUS_MULTIPROC_DIR,
which prometheus_client reads when it is imported (`values.ValueClass`); each process then
writes its own file there, a worker's counts stay when it dies (gunicorn starts another) and
`child_exit` forgets its live gauges. Anywhere else (WebTest, mod_wsgi, CGI, a gunicorn
command line of the admin's) the process keeps its own figures in memory: one process's.
That is why prometheus_client is imported here only when a metric is first used."""

from __future__ import annotations

import bisect
import ipaddress
import logging
import os
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from .net import Network, client_address, within

log = logging.getLogger(__name__)

ENV = "PROMETHEUS_MULTIPROC_DIR"
_lock = threading.Lock()


def use_directory(state_dir: str, name: str) -> str:
    """Make `state_dir/<name>` the multiprocess directory, emptied (the counts of a previous
    run would be added to this one's); a temporary one when it cannot be written. In the
    master, before any metric is made."""
    path = Path(state_dir) / name
    try:
        if path.exists():
            shutil.rmtree(path)
        path.mkdir(mode=0o700, parents=True)
    except OSError as exc:
        path = Path(tempfile.mkdtemp(prefix=f"archive-service-{name}-"))
        log.warning("metrics: cannot use %s/%s (%s); counting in %s", state_dir, name, exc, path)
    os.environ[ENV] = str(path)
    values = sys.modules.get("prometheus_client.values")
    if values is not None:  # imported already (a test's process): mode chosen anew
        values.ValueClass = values.get_value_class()
    return str(path)


def child_exit(server, worker) -> None:
    """gunicorn's hook, in the master, for a worker that ended: its live gauges are gone."""
    if os.environ.get(ENV):
        from prometheus_client import multiprocess

        try:
            multiprocess.mark_process_dead(worker.pid)
        except OSError as exc:
            # In the master, reaping: raised, it ended gunicorn (the whole service) when a
            # worker died or stopped while the state directory was read-only or gone.
            log.warning("metrics: the dead worker %d's gauges stay (%s)", worker.pid, exc)


FLUSH_EVERY = 1.0  # seconds a count may wait in its process before the shared files have it
_pending_lock = threading.Lock()  # counts of this process not yet in prometheus_client's values
_pending: dict[Any, list] = {}  # a child: what it has not written (a count; a histogram's buckets)
_flusher = False  # whether this process's flusher runs


def _forked() -> None:
    # Counts a fork copied are the parent's; its flusher thread did not come along.
    global _flusher, _room
    _flusher = False
    _pending.clear()
    _room = None


# prometheus_client's files (one a kind of metric and process, `{kind}_{pid}.db`) are sparse:
# on a full file system its first write into a page was a SIGBUS, and each worker started
# while state_dir was full died at its first count. Their first size is taken up front.
RESERVED = 1 << 16  # bytes: prometheus_client's first size of a file, far above our labels'
_KINDS = ("counter", "histogram", "gauge_livesum")
_room: bool | None = None  # whether this process may write its counts (None: not yet known)


def _has_room() -> bool:
    """Whether this process's files have room for its counts (taken once a process)."""
    global _room
    if _room is None:
        with _lock:  # no value is made meanwhile in a file about to be taken back
            if _room is None:
                _room = _reserve(os.environ.get(ENV))
    return _room


def _reserve(directory: str | None) -> bool:
    made: list[str] = []
    try:
        for kind in _KINDS if directory else ():
            path = f"{directory}/{kind}_{os.getpid()}.db"
            try:
                fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
                made.append(path)
            except FileExistsError:  # a dead process's of the same pid: prometheus_client's too
                fd = os.open(path, os.O_RDWR | os.O_NOFOLLOW)
            try:
                os.posix_fallocate(fd, 0, RESERVED)
            finally:
                os.close(fd)
    except OSError as exc:
        for path in made:  # an empty file would break every scrape's reading of the rest
            os.unlink(path)
        log.warning("metrics: no room in %s (%s): this process counts nothing", directory, exc)
        return False
    return True


def count_nothing() -> None:
    """This process counts nothing, and imports no prometheus_client to do it: a CGI
    process, whose counts would die with it unread (docs/metrics.md)."""
    global _room
    _room = False


def _no_room(exc: OSError) -> None:
    """This process counts nothing from now on: said once. A request it answers is not
    turned into a 500 (it was: the counting came after the app had answered)."""
    global _room
    if _room is not False:
        _room = False
        log.warning("metrics: cannot write this process's counts (%s): it counts nothing", exc)


os.register_at_fork(after_in_child=_forked)


class Metric:
    """A Prometheus metric declared at import, made when first counted (after `use_directory`
    decided where figures go); its labelled children kept, so counting is one dict look-up.

    A counter's or histogram's counts are added up in the process and written to
    prometheus_client's values once a second (`flush`, by a thread of the process started on
    its first count; and before a scrape, and when a worker stops): three writes of a
    multiprocess value (a lock, getpid, an mmap write each) at each request cost a urlRequest
    +20 µs of CPU in process, +12 µs batched (bench/RESULTS.md). A gauge is set at once."""

    def __init__(self, kind: str, name: str, doc: str, labels: tuple[str, ...] = (), **options):
        self.kind, self.name, self.doc, self.labelnames = kind, name, doc, labels
        self.options = options
        self._made: Any = None
        self._children: dict[tuple[str, ...], Any] = {}

    def made(self) -> Any:
        """The prometheus_client metric, made now if it is not yet."""
        if self._made is not None:
            return self._made
        with _lock:
            if self._made is None:
                import prometheus_client

                made = getattr(prometheus_client, self.kind)
                self._made = made(
                    self.name, self.doc, self.labelnames, registry=None, **self.options
                )
        return self._made

    def labels(self, *values: str) -> Any:
        if not (_room or _has_room()):
            return _NOWHERE
        child = self._children.get(values)
        if child is None:
            made = self.made()
            try:
                real = made.labels(*values) if values else made
            except OSError as exc:  # its file opened now, the state dir since read-only, gone
                _no_room(exc)
                return _NOWHERE
            batched = {"Counter": _Counted, "Histogram": _Observed}.get(self.kind)
            child = self._children[values] = batched(real) if batched else real
        return child


class _Nowhere:
    """A metric's child in a process without room for its counts: they are dropped."""

    def inc(self, amount: float = 1) -> None:
        pass

    observe = inc


_NOWHERE = _Nowhere()


class _Counted:
    __slots__ = ("real",)

    def __init__(self, real):
        self.real = real

    def inc(self, amount: float = 1) -> None:
        with _pending_lock:
            _started()
            held = _pending.get(self)
            if held is None:
                _pending[self] = [amount]
            else:
                held[0] += amount

    def write(self, held: list) -> None:
        self.real.inc(held[0])


class _Observed:
    __slots__ = ("real", "bounds")

    def __init__(self, real):
        self.real = real
        self.bounds = list(real._upper_bounds)

    def observe(self, value: float) -> None:
        bucket = bisect.bisect_left(self.bounds, value)
        with _pending_lock:
            _started()
            held = _pending.get(self)
            if held is None:
                held = _pending[self] = [0.0] + [0] * len(self.bounds)
            held[0] += value
            held[bucket + 1] += 1

    def write(self, held: list) -> None:
        # What Histogram.observe writes, a batch at once: the sum, and each bucket's count
        # (prometheus_client keeps them per bucket, made cumulative when collected).
        self.real._sum.inc(held[0])
        for bucket, count in zip(self.real._buckets, held[1:], strict=True):
            if count:
                bucket.inc(count)


def _started() -> None:
    """The flusher of this process runs (under _pending_lock): started on the first count."""
    global _flusher
    if not _flusher:
        _flusher = True
        threading.Thread(target=_flush_forever, name="metrics", daemon=True).start()


def _flush_forever() -> None:
    while True:
        time.sleep(FLUSH_EVERY)
        flush()


def worker_exit(server, worker) -> None:
    """gunicorn's hook, in a stopping worker: its last counts written."""
    flush()


def flush() -> None:
    """Write this process's counts (the flusher; a scrape; gunicorn's worker_exit)."""
    with _pending_lock:
        if not _pending:
            return
        batch = list(_pending.items()) if _room or _has_room() else []
        _pending.clear()
    for child, held in batch:
        child.write(held)


def exposition(
    own: Iterable[Metric], live: Callable[[], Iterable[Any]] | None = None
) -> tuple[bytes, str]:
    """(body, content type) of a scrape of the server that counts the metrics `own`: every
    process's figures (multiprocess) or this process's, and the `live` metric families
    computed now (gauges of the moment)."""
    from prometheus_client import CollectorRegistry, generate_latest
    from prometheus_client.exposition import CONTENT_TYPE_LATEST

    own = tuple(own)
    flush()  # this process's counts; the other workers' are at most FLUSH_EVERY old
    for metric in own if _has_room() else ():  # one without labels is shown from the start
        metric.made()
    registry = CollectorRegistry(auto_describe=False)
    if os.environ.get(ENV):
        from prometheus_client import multiprocess

        multiprocess.MultiProcessCollector(registry)
    else:
        registry.register(_InMemory(own))
    if live is not None:
        registry.register(_Live(live))
    return generate_latest(registry), CONTENT_TYPE_LATEST


NOT_FOUND = b"Not Found\n"


def scrape(environ, start_response, allow, trusted, own, live=None) -> list[bytes]:
    """The WSGI answer to `GET /metrics` of either server: `exposition(own, live)` to a client
    `allowed`, the same 404 as any unknown path to anyone else."""
    if environ.get("REQUEST_METHOD") not in ("GET", "HEAD") or not allowed(environ, allow, trusted):
        start_response("404 Not Found", [("Content-Type", "text/plain; charset=utf-8")])
        return [NOT_FOUND]
    body, content_type = exposition(own, live)
    start_response(
        "200 OK",
        [
            ("Content-Type", content_type),
            ("Content-Length", str(len(body))),
            ("Cache-Control", "no-store"),
        ],
    )
    return [] if environ.get("REQUEST_METHOD") == "HEAD" else [body]


class Metered:
    """WSGI middleware of either server: `GET /metrics` answered by `scrape` (not counted),
    every other request timed, its status and headers caught, and handed to `count`.
    `config`: its `metrics_allow` and `trusted_proxies` (who may scrape)."""

    own: tuple[Metric, ...] = ()  # the server's metrics

    def __init__(self, app, config: Any, service_path: str):
        self.app = app
        self.service_path = service_path
        self.allow = tuple(ipaddress.ip_network(n) for n in config.metrics_allow)
        self.trusted = tuple(ipaddress.ip_network(n) for n in config.trusted_proxies)

    def __call__(self, environ, start_response):
        path = environ.get("PATH_INFO", "")
        if path == "/metrics":
            return self.scrape(environ, start_response)
        began = time.perf_counter()
        seen: list = []

        def start(status, headers, exc_info=None):
            seen[:] = [status, headers]
            return start_response(status, headers, exc_info)

        body = self.app(environ, start)
        status = int(seen[0][:3]) if seen else 500
        self.count(environ, path, status, seen[1] if seen else [], time.perf_counter() - began)
        return body

    def count(self, environ, path: str, status: int, headers: list, elapsed: float) -> None:
        raise NotImplementedError

    def live(self) -> Iterable[Any]:
        """The metric families computed when scraped (gauges of the moment)."""
        return []

    def scrape(self, environ, start_response) -> list[bytes]:
        return scrape(environ, start_response, self.allow, self.trusted, self.own, self.live)


class _InMemory:
    def __init__(self, own: tuple[Metric, ...]):
        self.own = own

    def collect(self):
        for metric in self.own:
            yield from metric.made().collect()


class _Live:
    def __init__(self, families: Callable[[], Iterable[Any]]):
        self.families = families

    def collect(self):
        return self.families()


def gauge(name: str, doc: str, samples: Mapping[tuple[str, ...], float], labels=()):
    """A gauge family of the moment (for `exposition`'s `live`): value by label values."""
    from prometheus_client.core import GaugeMetricFamily

    family = GaugeMetricFamily(name, doc, labels=list(labels))
    for values, value in samples.items():
        family.add_metric(list(values), value)
    return family


def allowed(environ: Mapping[str, Any], allow: tuple[Network, ...], trusted: Iterable[Network]):
    """Whether the client (as `trusted_proxies` decides it) is in `metrics_allow`."""
    found = client_address(environ, trusted)
    return found is not None and within(found, allow)
