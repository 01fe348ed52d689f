"""A sidecar PyYAML cannot construct (issue 30, finding 1): `dc: {title: !!bool maybe}` made
its constructor raise KeyError, which escaped the sidecar's reader; a cold `serve` exited, a
running one's indexer crash-looped while /health said "ok", and `check` printed a traceback.
Here the real processes: the item is a problem of its own, named by `check` with its line
and column, and everything else is answered."""

from __future__ import annotations

import json
import urllib.error
from pathlib import Path
from urllib.parse import urlencode

import pytest

from archive_service.testing import wait_until
from serve_process import http_get, run_command, serve_collection
from support import pairs_of

pytestmark = pytest.mark.process

BAD = "bad.example/hostile/2026/01.01.10.20"  # the 26-byte sidecar of the issue
BAD_YAML = "dc: {title: !!bool maybe}\n"
GOOD = "iconet.com.br/banon/2009/09.09.22.01"  # an item of the sample collection
NEW = "new.example/fresh/2026/01.02.10.20"


def add_item(collection: Path, rep: str, sidecar: str) -> None:
    directory = collection / rep
    (directory / "doc").mkdir(parents=True)
    (directory / "doc" / "index.html").write_text("<p>hello</p>\n")
    (directory / "item.yaml").write_text(sidecar)


def url_of(serve, rep: str) -> str | None:
    query = urlencode(
        {
            "servicesubject": "urlRequest",
            "clientinformation.ipaddress": "192.0.2.1",
            "parsedibiurl.ibi": rep,
        }
    )
    try:
        return pairs_of(serve.get(query)).get("url")
    except (OSError, urllib.error.HTTPError):
        return None


def health(serve) -> tuple[int, dict]:
    status, _, body = http_get(f"http://{serve.address}/health")
    return status, json.loads(body)


def indexer(serve) -> str:
    return health(serve)[1]["index"]["indexer"] or ""


def test_check_names_the_item_with_line_and_column(collection: Path, tmp_path: Path):
    add_item(collection, BAD, BAD_YAML)
    done = run_command(
        ["check", "--collection", str(collection), "--state-dir", str(tmp_path / "state")]
    )
    assert "Traceback" not in done.stderr + done.stdout, done.stderr
    said = [line for line in (done.stdout + done.stderr).splitlines() if BAD in line]
    assert said, done.stdout + done.stderr
    assert any("line 1, column 13" in line and "maybe" in line for line in said), said


def test_a_cold_serve_starts_and_answers_beside_the_bad_sidecar(collection: Path, tmp_path):
    add_item(collection, BAD, BAD_YAML)
    serve = serve_collection(tmp_path, collection, tmp_path / "state")
    try:
        serve.wait_answering()
        assert url_of(serve, GOOD)
        assert url_of(serve, BAD) is None
        status, body = health(serve)
        assert status == 200, body
    finally:
        assert serve.stop() == 0


def test_a_running_serve_keeps_answering_when_a_bad_sidecar_appears(collection, tmp_path):
    serve = serve_collection(tmp_path, collection, tmp_path / "state")
    try:
        serve.wait_answering()
        assert wait_until(lambda: "watching" in indexer(serve), 30), serve.log()
        add_item(collection, BAD, BAD_YAML)
        add_item(collection, NEW, "state: Original\n")
        assert wait_until(lambda: url_of(serve, NEW) is not None, 10), serve.log()
        assert url_of(serve, GOOD)
        status, body = health(serve)
        assert status == 200 and "watching" in body["index"]["indexer"], body
        assert "exited with status" not in serve.log()  # the indexer never stopped
    finally:
        assert serve.stop() == 0
