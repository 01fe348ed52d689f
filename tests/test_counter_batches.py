"""COUNTER uses are buffered per worker and written in batches: a download costs an append.

Written by a thread of each process within FLUSH_EVERY (1 s) or FLUSH_ROWS uses, and when a
worker stops; a store that is locked or down never blocks a request, and a full buffer drops
uses and counts them. A worker killed outright loses what it buffered (at most the last
second of its uses; docs/counter.md).
"""

from __future__ import annotations

import sqlite3
import time

import pytest

from archive_service.stores import stats
from archive_service.stores.stats import counter
from serve_process import ROOT, SAMPLE, Serve, http_get, wait_until

FILE = "/col/iconet.com.br/banon/2009/09.09.22.01/doc/reference.bib"
ITEM = "iconet.com.br/banon/2009/09.09.22.01"
BROWSER = {"User-Agent": "Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128"}


def recorded(state) -> int:
    store = stats.Store(state)
    try:
        return sum(u.ibi == ITEM for u in store.uses(0, 2**40))
    except stats.StatsError:  # a worker is making the database
        return 0
    finally:
        store.close()


def serve(tmp_path, env=None) -> Serve:
    return Serve(
        tmp_path,
        "--collection",
        str(SAMPLE),
        "--state-dir",
        str(tmp_path / "state"),
        "--no-announce",
        "--workers",
        "2",
        env=env,
    )


@pytest.mark.process
def test_a_workers_uses_are_written_within_a_second_or_two(tmp_path):
    server = serve(tmp_path)
    try:
        server.wait_answering()
        for _ in range(20):
            http_get(f"http://{server.address}{FILE}", headers=BROWSER)
        done = time.monotonic()
        wait_until(lambda: recorded(tmp_path / "state") == 20, timeout=3, what="20 uses written")
        assert time.monotonic() - done < 3
    finally:
        assert server.stop() == 0


@pytest.mark.process
def test_a_graceful_stop_writes_what_the_workers_buffered(tmp_path):
    # The flusher made to wait an hour: only the stop can write the uses.
    hook = tmp_path / "hook"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(
        "import archive_service.stores.stats as s\ns.FLUSH_EVERY = 3600\n"
    )
    server = serve(tmp_path, env={"PYTHONPATH": f"{ROOT}:{hook}"})
    try:
        server.wait_answering()
        for _ in range(10):
            http_get(f"http://{server.address}{FILE}", headers=BROWSER)
        time.sleep(1.5)
        assert recorded(tmp_path / "state") == 0, "still buffered (the hook took)"
    finally:
        assert server.stop() == 0
    assert recorded(tmp_path / "state") == 10


def test_a_locked_store_does_not_hold_a_request(tmp_path):
    store = stats.Store(tmp_path)
    store.record_use(stats.Seen("a/b", counter.REQUEST, "192.0.2.1", "x"))
    store.flush()  # the database made
    other = sqlite3.connect(store.path, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")  # another writer holds the database
    try:
        began = time.perf_counter()
        for _ in range(100):
            store.record_use(stats.Seen("a/b", counter.REQUEST, "192.0.2.1", "x"))
        assert time.perf_counter() - began < 0.1, "100 uses recorded without waiting"
    finally:
        other.execute("ROLLBACK")
        other.close()
    assert len(store.uses(0, 2**40)) == 101, "written once the lock was gone"
    store.close()


def test_a_full_buffer_drops_uses_and_counts_them(tmp_path, monkeypatch, caplog):
    monkeypatch.setattr(stats, "BUFFER_MAX", 5)
    blocker = tmp_path / "state"
    blocker.write_text("not a directory")  # the store cannot be made
    store = stats.Store(blocker)
    for _ in range(8):
        store.record_use(stats.Seen("a/b", counter.REQUEST, "192.0.2.1", "x"))
    store.flush()
    assert store.uses_dropped == 3
    store.record_use(stats.Seen("a/b", counter.REQUEST, "192.0.2.1", "x"))
    assert store.uses_dropped == 4, "the five kept wait for the store"
    assert "cannot record COUNTER uses" in caplog.text
    blocker.unlink()
    store.flush()
    assert len(store.uses(0, 2**40)) == 5
    assert store.problem is None
    store.close()
