"""Acknowledgment throughput of the statistics stores on one node (issue 19): PostgreSQL (the
`database` setting) ÷ SQLite in the state directory (the default).

    python bench/ack_store.py [--rounds 5] [--acks 2000] [--threads 1,8]

Each round counts `--acks` acknowledgments, every one a fresh head (so each is an INSERT into
the seen keys and an upsert of a count: the service's common case), through
`Statistics.acknowledge` of each store, SQLite and PostgreSQL alternating in ABBA order; the
figure is the median of the per-round ratios. The PostgreSQL server is a throwaway cluster of
Debian's binaries on loopback (tests/postgres_server.py, fsync off as in the tests: the ratio
is the store's code and round trips, not the disk; SQLite keeps its own synchronous=NORMAL
WAL). In process, no HTTP: a request's own cost would only compress the ratio toward 1.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from archive_service.common import postgres  # noqa: E402
from archive_service.protocol.urlkeys import UrlKeys  # noqa: E402
from archive_service.web import stats  # noqa: E402

URL = "http://bench.example.org/col/sid.inpe.br/bench/2024/01.01.00.00/doc/a.pdf"


def one_round(store: stats.Statistics, keys: UrlKeys, acks: int, threads: int) -> float:
    """Acknowledgments counted per second."""
    heads = [keys.issue([URL]) for _ in range(acks)]
    share = [heads[i::threads] for i in range(threads)]
    counted = []

    def work(mine):
        n = 0
        for key in mine:
            ack = stats.Acknowledgment(key, URL, "Data", "Original", "sid.inpe.br/bench/x")
            n += store.acknowledge(ack, keys) == "counted"
        counted.append(n)

    workers = [threading.Thread(target=work, args=(s,)) for s in share]
    start = time.perf_counter()
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    took = time.perf_counter() - start
    if sum(counted) != acks:
        raise SystemExit(f"{type(store).__name__} counted {sum(counted)} of {acks}")
    return acks / took


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--acks", type=int, default=2000)
    parser.add_argument("--threads", default="1,8")
    args = parser.parse_args()
    import postgres_server

    reason = postgres_server.unavailable()
    if reason:
        print(f"ack_store: {reason}", file=sys.stderr)
        return 2
    server = postgres_server.PostgresServer().start()
    try:
        keys = UrlKeys.ephemeral()
        with tempfile.TemporaryDirectory() as state:
            for threads in [int(t) for t in args.threads.split(",")]:
                database = server.new_database()
                sqlite = stats.open_store(Path(state) / f"t{threads}", "")
                shared = stats.open_store(state, database)
                one_round(sqlite, keys, 50, threads)  # warm up: schema, pool, connections
                one_round(shared, keys, 50, threads)
                ratios, rates = [], {"sqlite": [], "postgresql": []}
                for r in range(args.rounds):
                    order = [sqlite, shared] if r % 2 == 0 else [shared, sqlite]
                    got = {}
                    for store in order:
                        name = "sqlite" if store is sqlite else "postgresql"
                        got[name] = one_round(store, keys, args.acks, threads)
                        rates[name].append(got[name])
                    ratios.append(got["postgresql"] / got["sqlite"])
                print(
                    f"{threads} thread(s): PostgreSQL ÷ SQLite {statistics.median(ratios):.2f}× "
                    f"(rounds {', '.join(f'{x:.2f}' for x in ratios)}; medians "
                    f"{statistics.median(rates['postgresql']):,.0f} vs "
                    f"{statistics.median(rates['sqlite']):,.0f} acknowledgments/s)"
                )
                sqlite.close()
    finally:
        postgres.close_all()
        server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
