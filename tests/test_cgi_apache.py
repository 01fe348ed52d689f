"""contrib's CGI program through Debian's real Apache (mod_cgid, www-data) and its mod_wsgi
daemon, on a collection of 100,000 items (issue 23): each request answers from the index the
indexer left, in a fraction of a second, and acknowledgments are counted.

The collection is bench/gen.py's, generated for the module (12 s) into a directory www-data
can read, or taken from $ARCHIVE_SERVICE_BENCH_CACHE (generated there if not there yet);
ARCHIVE_SERVICE_TEST_COLLECTION names another of its collections (e.g. 1,000,000 items, with
ARCHIVE_SERVICE_TEST_STATE_DIR: a state_dir owned by www-data whose index of it is built)."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from fronts import (
    WEB_USER,
    acknowledge,
    cli_as,
    debian_python_site,
    needs_debian_apache,
    needs_mod_wsgi,
    public_copy,
    start_cgi,
    start_mod_wsgi,
    state_dir_of,
    stats_as,
    url_request,
)
from serve_process import ROOT, SERVICE, free_port

ITEMS = 100_000


def bench_gen():
    spec = importlib.util.spec_from_file_location("bench_gen", ROOT / "bench" / "gen.py")
    module = sys.modules[spec.name] = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def big() -> Iterator[tuple[Path, dict]]:
    """bench/gen.py's collection and its manifest, readable by www-data: generated into a
    directory of its own (gen.py's default cache is under root's home, which www-data cannot
    enter) unless the environment names one."""
    named = os.environ.get("ARCHIVE_SERVICE_TEST_COLLECTION")
    if named:
        yield Path(named), json.loads((Path(named) / "bench-manifest.json").read_text())
        return
    gen = bench_gen()
    cache = os.environ.get("ARCHIVE_SERVICE_BENCH_CACHE")
    if cache:
        yield gen.ensure(ITEMS, Path(cache))
        return
    top = Path(tempfile.mkdtemp(prefix="archive-service-cgi-"))
    try:
        top.chmod(0o755)
        yield gen.ensure(ITEMS, top)
    finally:
        shutil.rmtree(top, ignore_errors=True)


@pytest.fixture(scope="module")
def built(big) -> Iterator[Path | None]:
    """A state_dir whose index of `big` is built once for the module, as the web server's
    user (as archive-service-indexer.service runs it): each test serves a copy of it, so
    its statistics are its own (one 100,000-item build per test was a minute of CI)."""
    if os.environ.get("ARCHIVE_SERVICE_TEST_STATE_DIR"):
        yield None
        return
    with public_copy() as top:
        python, site = debian_python_site(top)
        config = write_settings(top, big[0], state_dir_of(top), free_port())
        cli_as(WEB_USER, python, site, config, "index")
        yield top / "state"


def write_settings(public: Path, collection: Path, state: Path | str, port: int) -> Path:
    config = public / "archive-service.yaml"
    config.write_text(
        f"collection: {collection}\nstate_dir: {state}\narchiveaddress: 127.0.0.1:{port}\n"
        f"archiveserviceibi: {SERVICE}\nresolver: none\nindex_watch: 'off'\n"
    )
    config.chmod(0o644)
    return config


def indexed(public: Path, collection: Path, built: Path | None) -> tuple[str, Path, int, Path]:
    """Debian's Python and our package for it, a port, and settings for `collection` with a
    copy of the module's built index (or ARCHIVE_SERVICE_TEST_STATE_DIR's, used as it is)."""
    python, site = debian_python_site(public)
    port = free_port()
    state = os.environ.get("ARCHIVE_SERVICE_TEST_STATE_DIR")
    if state is None:
        state = public / "state"
        subprocess.run(["cp", "-a", str(built), str(state)], check=True)  # owner kept
    return python, site, port, write_settings(public, collection, state, port)


def timed_get(url: str) -> tuple[float, bytes]:
    started = time.perf_counter()
    with urllib.request.urlopen(url, timeout=120) as response:
        body = response.read()
    return time.perf_counter() - started, body


def assert_answers(front: str, manifest: dict, python: str, site: Path, config: Path) -> float:
    """The first request's time; every request answers, an acknowledgment is counted."""
    first, body = timed_get(f"{front}/{SERVICE}?servicesubject=inclusionConfirmationRequest")
    assert body == b"confirmation yes"
    answer = url_request(front, manifest["full"][0])
    assert answer["url"].startswith(f"{front}/col/"), answer
    acknowledge(front, answer)
    report = stats_as(WEB_USER, python, site, config)
    assert report["total"] == 1 and report["rejected"] == 0, report
    return first


@pytest.mark.process
@pytest.mark.slow
@needs_debian_apache
def test_cgi_through_apache_answers_at_once_at_100000_items(public, fronts, big, built):
    collection, manifest = big
    python, site, port, config = indexed(public, collection, built)
    apache = start_cgi(fronts, public, port, config, python, site)
    with apache.explained():
        assert_answers(apache.url, manifest, python, site, config)
        took = [timed_get(f"{apache.url}/{SERVICE}?servicesubject=inclusionConfirmationRequest")[0]
                for _ in range(5)]  # fmt: skip
    # A walk of 100,000 items took 3.6-4.9 s a request before (27.9 s on a cold page cache).
    print(f"CGI through Apache, {manifest['items']} items: {sorted(took)} s")
    assert sorted(took)[2] < 3, took


@pytest.mark.process
@pytest.mark.slow
@needs_debian_apache
@needs_mod_wsgi
def test_mod_wsgi_daemon_answers_its_first_request_at_once_at_100000_items(
    public, fronts, big, built
):
    collection, manifest = big
    python, site, port, config = indexed(public, collection, built)
    apache = start_mod_wsgi(fronts, public, port, config, site)
    with apache.explained():
        first = assert_answers(apache.url, manifest, python, site, config)
    # The daemon loads the .wsgi file on its first request: imports, create_app, the answer.
    print(f"mod_wsgi daemon's first request, {manifest['items']} items: {first:.2f} s")
    assert first < 3, first
