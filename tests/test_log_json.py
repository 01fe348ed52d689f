"""log_format: json: every line every process of ours writes is one JSON object (the serve
master, its workers and their access log with keys redacted, the indexer, the announcer; the
resolver and its access log), and a worker that quits has written its access lines."""

from __future__ import annotations

import contextlib
import json
import os
import signal

import pytest

from resolver_double import ResolverDouble
from serve_process import ANNOUNCING, SERVICE, Process, Serve, free_port, http_get, wait_until

pytestmark = pytest.mark.process

SECRET = "5550001234-9990004321"


def objects(text: str) -> list[dict]:
    found = []
    for line in text.splitlines():
        try:
            found.append(json.loads(line))
        except ValueError:
            raise AssertionError(f"not a JSON object: {line!r}\n{text}") from None
        assert isinstance(found[-1], dict), line
    return found


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    tmp_path = tmp_path_factory.mktemp("json")
    resolver = ResolverDouble().start()
    serve = Serve(
        tmp_path,
        "--state-dir",
        str(tmp_path / "state"),
        "--resolver",
        resolver.url,
        "--log-format",
        "json",
        *ANNOUNCING,
        env={"ARCHIVE_SERVICE_REGISTRATIONKEY": SECRET},
    )
    try:
        serve.wait_answering()
        serve.wait_log("status.archive included")
        serve.wait_log("watching")
        # The last request, then SIGQUIT to the workers at once (they exit within 0.1 s; a
        # SIGTERM's graceful stop takes longer than a batch): their batched access lines are
        # still waiting (common/access.py `Lines`) and must be written as they exit.
        workers = serve.workers()
        last = f"/{SERVICE}/r51/status?api_key={SECRET}&last=1"
        http_get(f"http://{serve.address}{last}")
        for pid in workers:
            # A worker that ended since it was listed has nothing left to write.
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGQUIT)
        wait_until(lambda: len(set(serve.workers()) - set(workers)) >= 2, what="new workers")
        serve.get()
    finally:
        serve.stop()
        resolver.stop()
    return serve.log(), last


def test_every_line_of_serve_is_a_json_object(served):
    text, _ = served
    lines = objects(text)
    for fields in lines:
        assert {"time", "level", "logger", "message", "pid"} <= fields.keys(), fields
    said = {(f["logger"], f["message"]) for f in lines}
    for logger, message in (
        ("gunicorn.error", "Booting worker"),
        ("archive_service.serve.announce", "included"),
        ("archive_service.indexer.watch", "watching"),
    ):
        assert any(n.startswith(logger) and message in m for n, m in said), (logger, text)
    announcer = [f for f in lines if "status.archive included" in f["message"]]
    master = [f for f in lines if "Listening at" in f["message"]]
    assert announcer and master and announcer[0]["pid"] != master[0]["pid"]


def test_access_lines_have_their_fields_without_keys(served):
    text, last = served
    assert SECRET not in text
    access = [f for f in objects(text) if f["logger"] == "gunicorn.access"]
    assert access and all(f["method"] == "GET" for f in access)
    written = [f for f in access if f["path"] == last.replace(SECRET, "<secret>")]
    assert written, "the last request before SIGQUIT was not logged"
    line = written[0]
    assert line["client"] == "127.0.0.1" and line["status"] == 200 and line["bytes"] > 0
    assert isinstance(line["duration"], float)


def test_every_line_of_the_resolver_is_a_json_object(tmp_path):
    port = free_port()
    resolver = Process(
        [
            "resolver",
            "serve",
            "--state-dir",
            str(tmp_path / "state"),
            "--bind",
            f"127.0.0.1:{port}",
            "--workers",
            "1",
        ],
        tmp_path / "resolver.log",
        env={"ARCHIVE_SERVICE_RESOLVER_LOG_FORMAT": "json"},
    ).start()
    url = f"http://127.0.0.1:{port}/J8LNKB5R7W/3FUQHC5"
    try:
        resolver.wait_answering(f"http://127.0.0.1:{port}/")
        http_get(f"{url}?servicesubject=inclusionRequest&registrationkey={SECRET}")
    finally:
        assert resolver.stop() == 0
    text = resolver.text()
    assert SECRET not in text
    lines = objects(text)
    access = [f for f in lines if f["logger"] == "gunicorn.access"]
    assert any("registrationkey=<secret>" in f["path"] for f in access), text
    assert any(f["logger"] == "archive_service.resolver.server" for f in lines), text
