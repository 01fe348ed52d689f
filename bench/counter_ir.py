"""Time to build a month's COUNTER Item Report (issue 20): `Statistics.item_report` over a
SQLite store holding `--uses` uses of one month (default 1,000,000: the issue's target is under
5 s), as `archive-service stats --report ir` builds it.

    python bench/counter_ir.py [--uses 1000000] [--items 10000] [--users 50000] [--rounds 3]

The uses are written straight into the `uses` table (how they got there is the service's
cost, not the report's): spread over January 2026, 5 % robots, a tenth of them double-clicks.
The first round finds no day rolled up (as on a store no worker of this version has rolled up
yet): it computes each day and keeps the finished ones; the later rounds add up the kept days,
as every report does once the workers have rolled up the days before (stores/stats/
`roll_up`). The report reads a snapshot (its own read-only connection) and writes a day's
figures in a short transaction of its own: `--while-writing` times batches of uses written
meanwhile from another thread.
"""

from __future__ import annotations

import argparse
import random
import sqlite3
import statistics
import sys
import tempfile
import threading
import time
from datetime import UTC, date, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from archive_service.stores import stats  # noqa: E402
from archive_service.stores.stats import counter  # noqa: E402

JAN = datetime(2026, 1, 1, tzinfo=UTC).timestamp()


def fill(store: stats.Store, uses: int, items: int, users: int) -> None:
    store.record_use(stats.Seen("warm/up", counter.REQUEST, "192.0.2.1", "x"))
    store.flush()  # the schema
    rng = random.Random(20)
    rows = []
    for _ in range(uses):
        t = JAN + rng.random() * 31 * 86400
        if rows and rng.random() < 0.1:
            t = rows[-1][0] + rng.random() * 30  # a double-click of the previous use
            rows.append((t, *rows[-1][1:]))
            continue
        kind = counter.REQUEST if rng.random() < 0.6 else counter.INVESTIGATION
        rows.append(
            (t, f"i{rng.randrange(items)}", kind, f"u{rng.randrange(users)}", rng.random() < 0.05)
        )
    with sqlite3.connect(store.path) as conn:
        conn.execute("DELETE FROM uses")
        conn.executemany(
            "INSERT INTO uses (t, ibi, kind, user, robot) VALUES (?, ?, ?, ?, ?)", rows
        )
    conn.close()


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--uses", type=int, default=1_000_000)
    parser.add_argument("--items", type=int, default=10_000)
    parser.add_argument("--users", type=int, default=50_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--while-writing", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        store = stats.Store(tmp)
        started = time.perf_counter()
        fill(store, args.uses, args.items, args.users)
        print(f"filled {args.uses:,} uses in {time.perf_counter() - started:.1f} s")
        writes: list[float] = []
        stop = threading.Event()

        def writer() -> None:
            other = stats.Store(tmp)
            while not stop.is_set():
                began = time.perf_counter()
                # One batch as a worker's flusher writes it (its hashing aside).
                other._insert_uses(
                    [(time.time(), "w/x", counter.REQUEST, "u", False, counter.OPEN)]
                )
                writes.append(time.perf_counter() - began)
                time.sleep(0.01)

        thread = threading.Thread(target=writer) if args.while_writing else None
        if thread:
            thread.start()
        times = []
        for _ in range(args.rounds):
            began = time.perf_counter()
            report = store.item_report(date(2026, 1, 1), date(2026, 1, 1), "bench")
            times.append(time.perf_counter() - began)
        stop.set()
        if thread:
            thread.join()
        rows = sum(
            len(a["Performance"])
            for i in report["Report_Items"]
            for a in i["Attribute_Performance"]
        )
        print(
            f"IR of {args.uses:,} uses: first (no day kept) {times[0]:.2f} s, then median "
            f"{statistics.median(times[1:] or times):.2f} s "
            f"(rounds {', '.join(f'{t:.2f}' for t in times)}), {rows:,} rows"
        )
        if writes:
            print(
                f"writes meanwhile: {len(writes)}, max {max(writes) * 1000:.1f} ms, "
                f"median {statistics.median(writes) * 1000:.2f} ms"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
