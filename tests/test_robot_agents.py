"""The COUNTER robots list read against a User-Agent's first ROBOT_AGENT characters (issue 30,
fourth adversarial pass): a client's 8 KB agents, each new, cost the use writer 18-65 ms of
matching each and 33 MB of cache a worker."""

from __future__ import annotations

import gc
import tracemalloc

from archive_service.stores import stats


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
