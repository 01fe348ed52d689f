"""GET /metrics of real two-worker `serve` and `resolver serve` (issue 36, point 1): the
figures add up over gunicorn's workers (each worker's own file in state_dir/metrics, read by
prometheus_client's MultiProcessCollector) and a worker killed keeps what it counted. Read
with prometheus_client's own parser; the one-process behaviour is tests/test_metrics.py."""

from __future__ import annotations

import os
import signal
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from prometheus_client import multiprocess
from prometheus_client.parser import text_string_to_metric_families

from archive_service import testing
from serve_process import Serve, http_get, resolver_serve, wait_until

URL_REQUEST = "&".join(
    (
        "servicesubject=urlRequest",
        "clientinformation.ipaddress=127.0.0.1",
        "parsedibiurl.ibi=LK47B6W/362SFKH",
    )
)
UNKNOWN = "/8JMKD3MGP7W/3EPGUE5"  # no Archive is included: 503


def total(base: str, name: str, **labels) -> float:
    status, _, body = http_get(base + "/metrics")
    assert status == 200
    return sum(
        s.value
        for family in text_string_to_metric_families(body.decode())
        for s in family.samples
        if s.name == name and all(s.labels.get(k) == v for k, v in labels.items())
    )


def per_process(directory: Path, name: str, **labels) -> dict[int, float]:
    """What each process's own file holds of `name` (the scrape sums them)."""
    found = {}
    for path in directory.glob("counter_*.db"):
        pid = int(path.stem.split("_")[1])
        for family in multiprocess.MultiProcessCollector.merge([str(path)]):
            for s in family.samples:
                if s.name == name and all(s.labels.get(k) == v for k, v in labels.items()):
                    found[pid] = found.get(pid, 0) + s.value
    return found


def spread(url: str, until, most: int = 400) -> int:
    """GETs of `url` 8 at a time, each on its connection, until `until()` (both workers
    answered); how many were sent. Each burst is given the time a worker takes to write its
    counts (FLUSH_EVERY, 1 s) before the next: on an idle machine 400 requests took less,
    and their counts were not yet in the files `until` reads."""
    sent = 0
    with ThreadPoolExecutor(8) as pool:
        while sent < most:
            list(pool.map(lambda _: http_get(url), range(16)))
            sent += 16
            if testing.wait_until(until, timeout=1.5, interval=0.05):
                return sent
    raise AssertionError(f"{most} requests and one worker answered them all")


@pytest.fixture(scope="module")
def serve(tmp_path_factory):
    base = tmp_path_factory.mktemp("metrics")
    process = Serve(base, "--workers", "2", "--state-dir", str(base / "state"))
    try:
        process.wait_answering()
        yield process, base / "state" / "metrics"
    finally:
        process.kill()


def test_serve_counts_add_up_over_workers_and_outlive_a_killed_one(serve):
    process, directory = serve
    base = f"http://{process.address}"
    name = "archive_service_protocol_requests_total"
    subject = {"servicesubject": "urlRequest", "outcome": "answered"}
    before = total(base, name, **subject)
    # The first worker answering is not the second one booted.
    wait_until(lambda: len(process.workers()) == 2, what="both workers")
    workers = process.workers()

    def both_answered() -> bool:
        counts = per_process(directory, name, **subject)
        return all(counts.get(pid, 0) > 0 for pid in workers)

    sent = spread(f"{process.url}?{URL_REQUEST}", both_answered)
    # Each worker writes its counts within a second (common/metrics.py FLUSH_EVERY).
    wait_until(lambda: total(base, name, **subject) == before + sent, what="every count")

    killed = workers[0]
    os.kill(killed, signal.SIGKILL)
    wait_until(
        lambda: len(process.workers()) == 2 and killed not in process.workers(),
        what="gunicorn to start a worker in place of the one killed",
    )
    process.wait_answering()
    assert per_process(directory, name, **subject)[killed] > 0, "its file kept"
    assert total(base, name, **subject) == before + sent
    http_get(f"{process.url}?{URL_REQUEST}")
    wait_until(lambda: total(base, name, **subject) == before + sent + 1, what="the new count")


@pytest.fixture(scope="module")
def resolver(tmp_path_factory):
    base = tmp_path_factory.mktemp("resolver-metrics")
    process, url = resolver_serve(base, "--workers", "2")
    try:
        yield url, base / "state" / "metrics"
    finally:
        process.kill()


def test_resolver_counts_add_up_over_workers(resolver):
    base, directory = resolver
    name = "archive_service_resolver_resolutions_total"
    before = total(base, name, outcome="no_archive")

    def both_answered() -> bool:
        return len([n for n in per_process(directory, name).values() if n > 0]) >= 2

    sent = spread(base + UNKNOWN, both_answered)
    wait_until(lambda: total(base, name, outcome="no_archive") == before + sent, what="counts")
    assert total(base, "archive_service_resolver_archives_asked_count") == before + sent
    assert total(base, "archive_service_resolver_registry_archives") == 0
