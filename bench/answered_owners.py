#!/usr/bin/env python3
"""What keeping an IBI's owner OWNER_GRACE past answered_ttl costs the answered store in
state_dir (resolver/stores/answered/sqlite.py), under a hostile included Archive that claims
every IBI and readers (or itself) asking random IBIs: each resolution is then an owned row.

  flood    rows and file size after --n such resolutions (`Answered.remember`, as a round
           to every Archive ends), and the bytes per row
  sweep    one sweep with the table at --rows + 99 writes (the cap's work: what has
           gone past its kept_until, then the soonest to expire past MAX_ROWS), against the
           floor of a write without a sweep, same run (medians over --rounds)
  flood's length to push out an owner remembered before it: MAX_ROWS / rate

    python3 bench/answered_owners.py [--n 20000] [--rows 1000000] [--rounds 3] [--rate 300]
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT)]

from archive_service.resolver import config  # noqa: E402
from archive_service.resolver.answered import Answered  # noqa: E402
from archive_service.resolver.stores import answered as stores  # noqa: E402
from archive_service.resolver.stores.answered import holders_text  # noqa: E402

EVIL = "evil.example/rep/2020/01.01.00.00"
NOW = time.time()


def random_ibi() -> str:
    return f"{uuid.uuid4().hex[:12]}.example/w/2020/01.01.00.00"  # 40 characters


def size(path: Path) -> int:
    with sqlite3.connect(path) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return sum(p.stat().st_size for p in path.parent.glob(path.name + "*"))


def flood(state: Path, n: int) -> tuple[int, int]:
    answered = Answered(300, state_dir=state)
    for _ in range(n):
        answered.remember(random_ibi(), [EVIL], owner=EVIL)
    path = state / config.ANSWERED_FILE
    with sqlite3.connect(path) as conn:
        rows = conn.execute("SELECT count(*) FROM answered").fetchone()[0]
    return rows, size(path)


def fill(path: Path, rows: int) -> None:
    """The table topped up to `rows` owned rows, expiring over the next answered_ttl (written
    in one transaction: a flood's rows, not its pace)."""
    text = holders_text(frozenset({EVIL.lower()}), EVIL.lower())
    with sqlite3.connect(path) as conn:
        have = conn.execute("SELECT count(*) FROM answered").fetchone()[0]
        conn.executemany(
            "INSERT OR REPLACE INTO answered VALUES (?, ?, ?)",
            ((random_ibi(), text, NOW + 300 * i / rows) for i in range(rows - have)),
        )
    size(path)  # its WAL checkpointed here, not in the write timed next


def timed(call) -> float:
    start = time.perf_counter()
    call()
    return time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=20000)
    parser.add_argument("--rows", type=int, default=stores.MAX_ROWS)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--rate", type=float, default=300.0)
    args = parser.parse_args()
    stores.MAX_ROWS = args.rows
    with tempfile.TemporaryDirectory() as tmp:
        rows, nbytes = flood(Path(tmp) / "flood", args.n)
        print(f"flood: {args.n} hostile resolutions -> {rows} rows, {nbytes / 1e6:.1f} MB")
        print(f"  {nbytes / rows:.0f} bytes a row: ~{nbytes / rows * args.rows / 1e6:.0f} MB")
        state = Path(tmp) / "cap"
        store = stores.open_shared(state)
        store.remember(random_ibi(), NOW + 300, frozenset({EVIL}), EVIL)  # the schema, a sweep
        sweeps, floors = [], []
        for _ in range(args.rounds):
            fill(state / config.ANSWERED_FILE, args.rows)
            store._sweeps._writes = 1  # the next 99 writes are no sweep, the 100th is
            store._sweeps.every = 100
            for _ in range(99):
                floors.append(timed(lambda: store.remember(random_ibi(), NOW, {EVIL}, EVIL)))
            sweeps.append(timed(lambda: store.remember(random_ibi(), NOW, {EVIL}, EVIL)))
        with sqlite3.connect(state / config.ANSWERED_FILE) as conn:
            left = conn.execute("SELECT count(*) FROM answered").fetchone()[0]
        sweep, floor = statistics.median(sweeps), statistics.median(floors)
        print(
            f"sweep at {args.rows} rows (+{store._sweeps.every - 1}): {sweep * 1e3:.0f} ms, "
            f"a write without one {floor * 1e3:.2f} ms ({sweep / floor:.0f}x); {left} rows left"
        )
    print(
        f"an owner is pushed out after {args.rows / args.rate / 3600:.1f} h of a flood at "
        f"{args.rate:.0f} resolutions/s; load average {os.getloadavg()[0]:.2f}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
