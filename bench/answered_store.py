#!/usr/bin/env python3
"""What the answered store in state_dir (resolver/stores/answered/sqlite.py) costs a
resolution, next to the worker's memory alone (the floor, same run, interleaved).

  hit      recall + owner of a remembered IBI (the hot path: the memory in front answers)
  miss     recall of an IBI never remembered (the memory, then the store)
  evicted  recall of an IBI the memory no longer holds (read back from the store)
  write    remember after a round to every Archive (a cold resolution's last step)

A cold resolution asks every included Archive (milliseconds: bench/resolver_rounds.py), so
`miss` and `write` are measured against that, `hit` against the floor.

    python3 bench/answered_store.py [--n 5000] [--rounds 5]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT)]

from archive_service.resolver.answered import Answered  # noqa: E402

HOLDER = "a.example/w/2020/01.01.00.00"


def per_call(fn, items) -> float:
    start = time.perf_counter()
    for item in items:
        fn(item)
    return (time.perf_counter() - start) / len(items) * 1e6


def one_round(stores: dict[str, Answered], n: int, tag: str) -> dict[str, dict[str, float]]:
    """Each step on each store in turn, first one then the other (ABBA over the rounds), so
    that both see the same machine."""
    remembered = [f"x.example/{tag}/2020/01.01.{i:06}" for i in range(n)]
    unknown = [f"y.example/{tag}/2020/01.01.{i:06}" for i in range(n)]
    figures: dict[str, dict[str, float]] = {name: {} for name in stores}
    for answered in stores.values():
        answered._entries.clear()  # the same memory for both: `evicted` refilled the store's
    steps = (
        ("write", lambda a: lambda i: a.remember(i, [HOLDER], HOLDER), remembered),
        ("hit", lambda a: lambda i: (a.recall(i), a.owner(i)), remembered),
        ("miss", lambda a: a.recall, unknown),
        ("evicted", lambda a: a.recall, remembered),
    )
    for what, call, items in steps:
        if what == "evicted":  # as past the memory's bound, or after a restart
            for answered in stores.values():
                answered._entries.clear()
        order = list(stores.items())
        for name, answered in order if tag[-1] in "02468" else order[::-1]:  # ABBA
            figures[name][what] = per_call(call(answered), items)
    return figures


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=5000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as state:
        stores = {"memory": Answered(300), "sqlite": Answered(300, state_dir=state)}
        runs: dict[str, list[dict[str, float]]] = {name: [] for name in stores}
        for r in range(args.rounds):
            for name, figures in one_round(stores, args.n, f"r{r}").items():
                runs[name].append(figures)
    print(f"load average {os.getloadavg()[0]:.2f}; medians of {args.rounds} rounds of {args.n}")
    for what in ("hit", "miss", "evicted", "write"):
        floor, sqlite = (statistics.median(run[what] for run in runs[n]) for n in stores)
        print(f"{what:8} memory {floor:7.1f} us   sqlite {sqlite:7.1f} us ({sqlite / floor:.2f}x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
