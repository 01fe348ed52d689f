"""GET /metrics (issue 36, point 1; docs/metrics.md) in one process: what the Archive and
the resolver count, read back with prometheus_client's own parser, and who may read it
(`metrics_allow`, the client decided through `trusted_proxies`). The figures added up over
gunicorn's workers: tests/test_metrics_serve.py."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest
import webtest
from prometheus_client.parser import text_string_to_metric_families

from archive_service.protocol import pairs
from archive_service.resolver.app import create_resolver_app
from archive_service.resolver.resolve import ArchiveRef, Conflict
from archive_service.web import create_app
from support import ADDRESS, ROOT, Client

RELATORIO = "8JMKD3MGP7W/3EPGUE5"  # sid.inpe.br/mtc-m19/2013/09.04.12.27.57, a /col/ file
LOOPBACK = {"REMOTE_ADDR": "127.0.0.1"}
OUTSIDER = "203.0.113.9"


def samples(text: str) -> dict[tuple[str, tuple], float]:
    """Every sample of an exposition: (name, sorted labels) -> value."""
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def scrape(test: webtest.TestApp, **environ) -> dict[tuple[str, tuple], float]:
    got = test.get("/metrics", extra_environ={**LOOPBACK, **environ})
    assert got.content_type == "text/plain"
    return samples(got.text)


def value(found: dict, name: str, **labels) -> float:
    return found.get((name, tuple(sorted(labels.items()))), 0.0)


def test_the_archive_counts_protocol_requests_acknowledgments_downloads_and_gauges(settings):
    client = Client(create_app(settings), "")
    before = scrape(client.test)
    got = dict(pairs.parse(client.url_request(RELATORIO).text))
    client.service(status=400, servicesubject="nonsense")
    # An acknowledgment from loopback with resolver none counts; the same key again is a
    # replay; a key that is not the answer's is refused.
    ack = {
        "servicesubject": "acknowledgment",
        "clientinformation.ipaddress": "150.163.2.175",
        "contenttype": got["contenttype"],
        "state": got["state"],
        "url": got["url"],
        "url.persistent": f"http://urlib.net/{RELATORIO}",
        "urlkey": got["urlkey"],
    }
    client.service(**ack)
    client.service(**ack)
    client.service(**{**ack, "urlkey": "1000000000-1000000000"})
    path = got["url"][len(f"http://{ADDRESS}") :]
    file = client.test.get(path, extra_environ=LOOPBACK)
    client.test.get(path, headers={"Range": "bytes=0-9"})
    client.test.get("/")

    after = scrape(client.test)

    def delta(name, **labels):
        return value(after, name, **labels) - value(before, name, **labels)

    requests = "archive_service_protocol_requests_total"
    assert delta(requests, servicesubject="urlRequest", outcome="answered") == 1
    assert delta(requests, servicesubject="other", outcome="error") == 1
    assert delta(requests, servicesubject="acknowledgment", outcome="answered") == 1
    assert delta(requests, servicesubject="acknowledgment", outcome="replay") == 1
    assert delta(requests, servicesubject="acknowledgment", outcome="refused_key") == 1
    acks = "archive_service_acknowledgments_total"
    assert delta(acks, result="counted") == 1
    assert delta(acks, result="replay") == 1
    assert delta(acks, result="forged") + delta(acks, result="malformed") == 1
    assert delta("archive_service_col_downloads_total", sent_by="archive") == 2
    assert delta("archive_service_col_bytes_total") == len(file.body) + 10
    # Two /col/ files, and the acknowledged data item (served here: no second use).
    assert delta("archive_service_counter_uses_total", result="recorded") == 2
    duration = "archive_service_request_duration_seconds_count"
    assert delta(duration, kind="service") == 5
    assert delta(duration, kind="col") == 2
    assert delta(duration, kind="pages") >= 1
    # The gauges of the moment, from /health's figures.
    assert value(after, "archive_service_healthy") == 1
    assert value(after, "archive_service_state_dir_writable") == 1
    assert value(after, "archive_service_index_items", state="Original") > 0
    assert value(after, "archive_service_index_age_seconds") >= 0
    assert ("archive_service_index_age_seconds", ()) in after


def test_metrics_are_served_only_to_metrics_allow_as_trusted_proxies_decide(settings):
    test = webtest.TestApp(create_app(settings))  # default: loopback only
    test.get("/metrics", extra_environ={"REMOTE_ADDR": OUTSIDER}, status=404)
    test.get("/metrics", extra_environ={"REMOTE_ADDR": "::1"}, status=200)
    # Through the loopback proxy (trusted by default), the user is the forwarded address.
    forwarded = {"HTTP_X_FORWARDED_FOR": OUTSIDER}
    test.get("/metrics", extra_environ={**LOOPBACK, **forwarded}, status=404)
    # An address the client writes before a trusted proxy's entry is never read.
    test.get(
        "/metrics",
        extra_environ={"REMOTE_ADDR": OUTSIDER, "HTTP_X_FORWARDED_FOR": "127.0.0.1"},
        status=404,
    )
    monitor = webtest.TestApp(create_app({**settings, "metrics_allow": "203.0.113.0/24"}))
    monitor.get("/metrics", extra_environ={**LOOPBACK, **forwarded}, status=200)
    monitor.get("/metrics", extra_environ={"REMOTE_ADDR": OUTSIDER}, status=200)
    monitor.get("/metrics", extra_environ=LOOPBACK, status=404)


def test_metrics_allow_none_keeps_and_serves_no_metrics(settings):
    app = create_app({**settings, "metrics_allow": "none"})
    webtest.TestApp(app).get("/metrics", extra_environ=LOOPBACK, status=404)


def test_the_resolver_counts_resolutions_and_archives_asked(tmp_path):
    app = create_resolver_app({"state_dir": str(tmp_path / "resolver"), "rounds": 1})
    test = webtest.TestApp(app)
    before = scrape(test)
    test.get("/8JMKD3MGP7W/3EPGUE5", extra_environ=LOOPBACK, status=503)  # none included
    test.get("/", extra_environ=LOOPBACK)
    after = scrape(test)
    name = "archive_service_resolver_resolutions_total"
    assert value(after, name, outcome="no_archive") - value(before, name, outcome="no_archive")
    count = "archive_service_resolver_archives_asked_count"
    assert value(after, count) - value(before, count) == 1
    assert value(after, "archive_service_resolver_registry_archives") == 0
    assert ("archive_service_resolver_acknowledgments_waiting", ()) in after
    test.get("/metrics", extra_environ={"REMOTE_ADDR": OUTSIDER}, status=404)
    test.get(
        "/metrics",
        extra_environ={**LOOPBACK, "HTTP_X_FORWARDED_FOR": OUTSIDER},
        status=404,
    )


def test_the_resolver_counts_acknowledgments_dropped_and_conflicting_claims(tmp_path):
    app = create_resolver_app({"state_dir": str(tmp_path / "resolver"), "ack_queue": 1})
    test = webtest.TestApp(app)
    parts = app.extensions["resolver"]
    before = scrape(test)
    queue = parts["acknowledgments"]
    # 192.0.2.1 (TEST-NET-1) never answers: each sender thread waits on one, and the queue
    # (1) is full for the rest, dropped at once.
    archive = ArchiveRef("192.0.2.1:9", "J8LNKB5R7W/3FUQHC6")
    for _ in range(20):
        queue.put(archive, {"servicesubject": "acknowledgment"})
    parts["conflicts"](Conflict("J8LNKB5R7W/3FUQHC7", "a", "b", "the naming authority"))
    after = scrape(test)
    name = "archive_service_resolver_acknowledgments_total"
    assert value(after, name, event="queued") - value(before, name, event="queued") == 20
    assert value(after, name, event="dropped") - value(before, name, event="dropped") >= 1
    conflicts = "archive_service_resolver_conflicting_claims_total"
    assert value(after, conflicts) - value(before, conflicts) == 1


FULL_DISK = r"""
import os, sys
state = sys.argv[1]
fd = os.open(os.path.join(state, "filler"), os.O_WRONLY | os.O_CREAT)
try:
    while True:
        os.write(fd, b"x" * 4096)
except OSError:
    os.close(fd)
from archive_service.common import metrics
from archive_service.web import metrics as web_metrics
metrics.use_directory(state, "metrics")
web_metrics.USES.labels("recorded").inc()
web_metrics.DURATION.labels("service").observe(0.01)
metrics.flush()
body, _ = metrics.exposition(web_metrics.OWN)
print("answered", len(body))
"""


def test_a_full_state_directory_costs_the_counts_not_the_process(tmp_path):
    """prometheus_client's files are sparse: on a full file system its first write into one
    was a SIGBUS, so each worker started while state_dir was full died at its first count
    (adversarial pass over issue 30, second round). Run in a user namespace on a 64 KiB
    tmpfs, filled."""
    mount = tmp_path / "small"
    mount.mkdir()
    script = tmp_path / "full.py"
    script.write_text(FULL_DISK)

    def in_namespace(command: str) -> subprocess.CompletedProcess:
        shell = f'mount -t tmpfs -o size=64k tmpfs "{mount}" && {command}'
        return subprocess.run(
            ["unshare", "-rm", "sh", "-c", shell],
            cwd=ROOT,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
            capture_output=True,
            text=True,
            timeout=60,
        )

    if shutil.which("unshare") is None or in_namespace("true").returncode != 0:
        pytest.skip("no user namespace here to mount a small tmpfs in")
    run = in_namespace(f'exec "{sys.executable}" "{script}" "{mount}"')
    assert run.returncode == 0, (run.returncode, run.stderr[-2000:])
    assert "answered" in run.stdout
    assert "counts nothing" in run.stderr


GONE = r"""
import shutil, sys
from archive_service.common import metrics
from archive_service.web import metrics as web_metrics
shutil.rmtree(metrics.use_directory(sys.argv[1], "metrics"))
web_metrics.DURATION.labels("service").observe(0.01)
web_metrics.REQUESTS.labels("urlRequest", "answered").inc()
metrics.flush()
print("answered")
"""


def test_a_metrics_directory_removed_costs_the_counts_not_the_requests(tmp_path):
    """A worker started after state_dir/metrics was removed (a cleanup; /tmp's cleaner for
    the fallback) raised FileNotFoundError counting each request, after the app had
    answered: every request of that worker was a 500 (adversarial pass over issue 30,
    second round)."""
    script = tmp_path / "gone.py"
    script.write_text(GONE)
    run = subprocess.run(
        [sys.executable, str(script), str(tmp_path)],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 0 and "answered" in run.stdout, run.stderr[-2000:]
    assert "counts nothing" in run.stderr
