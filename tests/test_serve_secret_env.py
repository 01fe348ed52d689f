"""ARCHIVE_SERVICE_REGISTRATIONKEY is read once by `serve` and leaves the environment (issue 15):
the workers, the indexer and the announcer do not carry it in /proc/<pid>/environ, and the
announcement still carries the key, also after a SIGHUP reload that re-reads the settings."""

from __future__ import annotations

import signal
import time
from pathlib import Path

import pytest
import yaml

from resolver_double import ResolverDouble
from serve_process import SAMPLE, SERVICE, Serve, children, cmdline

pytestmark = pytest.mark.process

KEY = "5550001234-9990004321"
VARIABLE = b"ARCHIVE_SERVICE_REGISTRATIONKEY"


def environ_of(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/environ").read_bytes()
    except (
        ProcessLookupError,
        FileNotFoundError,
    ):  # a short-lived child (a fork about to exec) is gone: nothing
        return b""


def descendants(pid: int) -> list[int]:
    found = []
    for child in children(pid):
        found += [child, *descendants(child)]
    return found


@pytest.fixture
def resolver():
    double = ResolverDouble().start()
    yield double
    double.stop()


def test_the_key_leaves_the_environment_and_still_reaches_the_resolver(tmp_path, resolver):
    config = tmp_path / "archive-service.yaml"
    settings = {
        "collection": str(SAMPLE),
        "archiveserviceibi": SERVICE,
        "archiveip": "127.0.0.1",
        "archiveadmemailaddress": "admin@example.org",
        "resolver": resolver.url,
        "exclusion_timeout": 2,
        "workers": 2,
        "state_dir": str(tmp_path / "state"),
    }  # its own indexer, no other test's
    config.write_text(yaml.safe_dump(settings))
    serve = Serve(tmp_path, config=config, env={VARIABLE.decode(): KEY})
    try:
        [inclusion] = resolver.wait_for(1, "inclusionRequest")
        assert inclusion.pairs["registrationkey"] == KEY
        serve.wait_log("status.archive included")

        def ours() -> list[int]:
            return [serve.process.pid, *descendants(serve.process.pid)]

        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:  # both workers and the indexer are up
            if len(serve.workers()) == 2 and any(
                b"--watch" in cmdline(p) for p in descendants(serve.process.pid)
            ):
                break
            time.sleep(0.1)
        processes = ours()
        assert any(b"--watch" in cmdline(p) for p in processes), "the indexer runs"
        for pid in processes:
            assert VARIABLE not in environ_of(pid), (pid, cmdline(pid))
            assert KEY.encode() not in environ_of(pid), (pid, cmdline(pid))

        # SIGHUP with a changed pair: the settings are read again, the key comes along.
        config.write_text(yaml.safe_dump({**settings, "archiveadmemailaddress": "new@example.org"}))
        serve.signal(signal.SIGHUP)
        [_, second] = resolver.wait_for(2, "inclusionRequest")
        assert second.pairs["registrationkey"] == KEY
        assert second.pairs["archiveadmemailaddress"] == "new@example.org"
        [exclusion] = resolver.wait_for(1, "exclusionRequest")
        assert exclusion.pairs["registrationkey"] == KEY
        assert "still serving the previous settings" not in serve.log()
        for pid in ours():
            assert KEY.encode() not in environ_of(pid), (pid, cmdline(pid))
        assert serve.stop(20) == 0
        assert resolver.subjects()[-1] == "exclusionRequest"
        assert resolver.received[-1].pairs["registrationkey"] == KEY
    finally:
        serve.kill()
