"""The state directory turning read-only under a running service (issue 15): the standby
worker, which tries to take over the indexer every second, says so in one line, once, not with
a traceback every second.

A real read-only file system: the index directory is bind-mounted onto itself and that mount
made read-only (tests run as root, so permission bits would not stop anything). Open files stay
writable, as when the kernel remounts a failing disk read-only; every new open fails EROFS."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from archive_service.indexer import follower as followermod
from serve_process import serve_collection


@pytest.mark.process
@pytest.mark.slow
def test_a_read_only_state_is_said_once_by_the_standby_worker(
    collection: Path, tmp_path, read_only
):
    state = tmp_path / "state"
    serve = serve_collection(tmp_path, collection, state)
    try:
        serve.wait_answering(timeout=60)
        serve.wait_log("consistency rescan at start")
        read_only(state / "index")
        time.sleep(5 * followermod.FOLLOW_SECONDS)
        log = serve.log()
        said = [
            line
            for line in log.splitlines()
            if "start the indexer of" in line and "Read-only file system" in line
        ]
        assert len(said) == 1, log
        assert "Traceback" not in log, log
        assert serve.stop() == 0
    finally:
        serve.kill()


def test_the_reason_is_repeated_at_a_slow_interval(collection: Path, tmp_path, monkeypatch, caplog):
    from archive_service import settings
    from archive_service.index.store import Store

    (tmp_path / "state").write_text("a file where the state directory should be")
    store = Store(collection, tmp_path / "state")
    config = settings.load(
        options={"collection": str(collection), "state_dir": str(tmp_path / "state")}, environ={}
    )
    monkeypatch.setattr(followermod, "FOLLOW_SECONDS", 0.01)
    monkeypatch.setattr(followermod, "REPEAT_SECONDS", 0.3)
    follower = followermod.Follower(store, config)
    follower.start()
    time.sleep(1.0)  # about 100 tries
    follower.stop()
    said = [r for r in caplog.records if "cannot start the indexer" in r.getMessage()]
    assert 2 <= len(said) <= 5, [r.getMessage() for r in said]
    assert not any(r.exc_info for r in said)
