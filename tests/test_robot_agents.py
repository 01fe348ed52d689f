"""The COUNTER robots list read against a User-Agent's first ROBOT_AGENT characters (issue 30,
fourth adversarial pass): a client's 8 KB agents, each new, cost the use writer 18-65 ms of
matching each and 33 MB of cache a worker."""

from __future__ import annotations

import gc
import sqlite3
import tracemalloc

from archive_service.stores import stats
from archive_service.stores.stats import counter


def test_only_the_agents_first_characters_are_matched():
    assert stats.is_robot("Googlebot/2.1")
    assert not stats.is_robot("a" * stats.ROBOT_AGENT + " Googlebot/2.1")


def test_many_long_agents_keep_little():
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for i in range(100):
            stats.is_robot(f"{i} " + "a " * 4000)
        gc.collect()
        kept = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert kept < 200_000, f"{kept} bytes kept"  # before: 100 agents of 8 KB, 820 KB


def test_uses_waiting_for_the_store_keep_short_agents(tmp_path):
    # Buffered while another writer holds the database: before, each use kept its whole
    # agent, so BUFFER_MAX uses of 8 KB agents were 820 MB a worker.
    store = stats.Store(tmp_path)
    store.record_use(stats.Seen("a/b", counter.REQUEST, "192.0.2.1", "x"))
    store.flush()  # the database made
    other = sqlite3.connect(store.path, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")
    try:
        gc.collect()
        tracemalloc.start()
        try:
            before = tracemalloc.get_traced_memory()[0]
            for i in range(200):
                store.record_use(
                    stats.Seen("a/b", counter.REQUEST, "192.0.2.1", f"{i} " + "a " * 4000)
                )
            kept = tracemalloc.get_traced_memory()[0] - before
        finally:
            tracemalloc.stop()
    finally:
        other.execute("ROLLBACK")
        other.close()
        store.close()
    assert kept < 400_000, f"{kept} bytes kept"  # before: 200 agents of 8 KB, 1.6 MB
