"""`GET /health` (SPEC: the Archive's JSON health, 200 when it can answer, else 503): for load
balancers and monitoring. The 503 cases are made for real: a state directory on a read-only
mount, an index file overwritten with garbage under the app."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from archive_service.common import inclusion
from archive_service.index.store import Store
from archive_service.indexer import follower
from archive_service.testing import wait_until
from archive_service.web import create_app
from serve_process import http_get, serve_collection
from support import SERVICE, Client, garble_past_first_page


@pytest.fixture
def app(settings):
    return create_app(settings)


@pytest.mark.parametrize("path", ["/health", f"/{SERVICE}/health"])
def test_a_sound_archive_is_healthy(settings, path):
    client = Client(create_app(settings), "")
    got = client.get(path, status=200)
    assert got.content_type == "application/json"
    assert got.headers["Cache-Control"] == "no-store"
    body = got.json
    assert body["status"] == "ok" and body["problems"] == []
    index = body["index"]
    assert index["items"] == 15 and index["complete"] is True and index["damaged"] is None
    assert index["refreshed"] and 0 <= index["age_seconds"] < 60
    assert body["state_dir"] == {"writable": True}
    assert body["inclusion"] is None  # no announcer has said anything


def test_the_inclusion_the_announcer_recorded_is_reported(settings):
    client = Client(create_app(settings), "/archive")
    detail = "the database connection to postgresql://user@db.internal:5432/stats broke"
    inclusion.record(settings["state_dir"], "unconfirmed", "http://resolver.example", detail)
    got = client.get("/health", status=200)
    body = got.json
    assert body["inclusion"]["state"] == "unconfirmed"
    assert body["inclusion"]["resolver"] == "http://resolver.example"
    assert body["inclusion"]["time"].endswith("+00:00")
    assert "detail" not in body["inclusion"] and "db.internal" not in got.text  # the log's


def test_a_read_only_state_directory_is_a_503(settings, read_only):
    app = create_app(settings)
    state = Path(settings["state_dir"])
    read_only(state)
    got = Client(app, "").get("/health", status=503)
    body = got.json
    assert body["status"] == "failing"
    assert body["state_dir"]["writable"] is False
    assert "cannot write in the state directory: Read-only file system" in body["problems"], body


def test_a_damaged_index_is_a_503_and_says_so(settings, app):
    path = Store(settings["collection"], settings["state_dir"]).path
    garble_past_first_page(path)
    got = Client(app, "").get("/health", status=503)
    body = got.json
    assert body["status"] == "failing" and body["index"]["damaged"], body
    assert any("damaged" in p for p in body["problems"]), body


def test_a_state_directory_that_is_a_file_is_a_503(settings, tmp_path):
    # The service starts anyway (the index goes to a private directory; keys and statistics
    # cannot be kept): the health check says what is wrong.
    state = tmp_path / "not-a-directory"
    state.write_text("a file where the state directory should be")
    app = create_app({**settings, "state_dir": str(state)})
    body = Client(app, "").get("/health", status=503).json
    assert not body["state_dir"]["writable"]
    assert any("cannot write in the state directory" in p for p in body["problems"]), body


@pytest.mark.process
@pytest.mark.slow
def test_a_running_service_turns_unhealthy_when_its_state_turns_read_only(
    collection, tmp_path, read_only
):
    state = tmp_path / "state"
    serve = serve_collection(tmp_path, collection, state)
    try:
        serve.wait_answering(timeout=60)
        serve.wait_log("consistency rescan at start")
        url = f"http://{serve.address}/health"

        def health() -> tuple[int, dict]:
            status, _, body = http_get(url, timeout=10)
            return status, json.loads(body)

        status, body = health()
        assert status == 200, body
        assert body["index"]["indexer"].startswith("watching since"), body
        read_only(state)
        status, body = health()
        assert status == 503 and not body["state_dir"]["writable"], body
        # The service still answers from the open index (the workers' connections stay open).
        assert serve.get() == "confirmation yes"
        assert serve.stop() == 0, serve.log()
    finally:
        serve.kill()


@pytest.mark.process
def test_an_indexer_started_again_and_again_is_a_503(settings, collection, tmp_path, monkeypatch):
    # The Follower's real indexer processes, each exiting at its start: the collection went
    # from under the running service. A crash loop like this said 200 "ok" (issue 30).
    monkeypatch.setattr(follower, "FOLLOW_SECONDS", 0.05)
    monkeypatch.setattr(follower, "MAX_STARTS", 2)  # each start takes a Python's start-up
    app = create_app(settings)
    live = app.extensions["archive_index"]
    client = Client(app, "")
    try:
        collection.rename(tmp_path / "away")
        live.follow()

        def status() -> int:
            return client.get("/health", expect_errors=True).status_int

        assert wait_until(lambda: status() == 503, timeout=60)
        body = client.get("/health", status=503).json
        assert any(
            "indexer was started" in p and "keeps stopping" in p for p in body["problems"]
        ), body
        # Once it is no longer started again and again, the Archive is healthy again.
        live.follower.stop()
        (tmp_path / "away").rename(collection)
        monkeypatch.setattr(follower, "STARTS_WINDOW", 1.0)  # rather than a minute's wait
        assert wait_until(lambda: status() == 200, timeout=30)
    finally:
        live.close()
