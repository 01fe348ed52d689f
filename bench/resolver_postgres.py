#!/usr/bin/env python3
"""What a resolution costs PostgreSQL when the resolver's `database` names it (issue 24):
the registry's change check every resolution makes, and the reads and writes of the
Archives that answered (resolver/answered.py) on a miss in a worker's memory and after a
round to every Archive. A throwaway cluster (tests/postgres_server.py), N included
Archives, sequential medians in process (no HTTP).

    python3 bench/resolver_postgres.py [--archives 1000] [--n 500]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from archive_service.common import postgres  # noqa: E402
from archive_service.resolver.answered import Answered  # noqa: E402
from archive_service.resolver.registry import Registry  # noqa: E402
from postgres_server import PostgresServer, unavailable  # noqa: E402


def median_ms(call, n: int) -> float:
    samples = []
    for i in range(n):
        start = time.perf_counter()
        call(i)
        samples.append(time.perf_counter() - start)
    return statistics.median(samples) * 1000


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--archives", type=int, default=1000)
    parser.add_argument("--n", type=int, default=500)
    args = parser.parse_args()
    if reason := unavailable():
        print(f"skipped: {reason}")
        return 0
    server = PostgresServer().start()
    try:
        url = server.new_database()
        with tempfile.TemporaryDirectory() as tmp:
            registry = Registry(tmp, url)
            with postgres.transaction(url) as conn:
                for i in range(args.archives):
                    conn.execute(
                        "INSERT INTO resolver_archive (ibikey, serviceibi, salt, keyhash, "
                        "registered, included, address) VALUES (%s, %s, '\\x00', '\\x00', '', "
                        "1, %s)",
                        (f"fake/{i}", f"fake/{i}", f"127.0.0.1:{10000 + i}"),
                    )
            answered = Answered(300, url)
            holders = ["fake/1", "fake/2"]
            read_all = median_ms(lambda i: registry.records(included_only=True), args.n)
            check = median_ms(lambda i: registry._store.version(), args.n)
            write = median_ms(
                lambda i: answered._shared.remember(f"ibi/{i}", 1e12, holders, None), args.n
            )
            read = median_ms(lambda i: answered._shared.recall(f"ibi/{i}", 0), args.n)
        print(
            f"{args.archives} included: registry change check {check:.2f} ms (reading every "
            f"row, as before: {read_all:.2f} ms); answered read {read:.2f} ms, write "
            f"{write:.2f} ms (medians, one connection of the pool, loopback)"
        )
    finally:
        postgres.close_all()
        server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
