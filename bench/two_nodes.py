#!/usr/bin/env python3
"""Resolution throughput with two `serve` nodes behind nginx vs one (issue 19).

The bed of tests/test_two_nodes_e2e.py: a throwaway PostgreSQL cluster, the reference resolver,
two `serve` nodes (2 workers each) of one Archive sharing the database, contrib/nodes' nginx
balancing them, the Archive included at nginx's address. Each round resolves the same
persistent URL N times through the resolver from C concurrent clients (urlRequest and
acknowledgment through nginx); "one node" is the same nginx reloaded with node b marked
`down`. Rounds alternate ABBA; the figure is the median of the per-pair ratios.

    python3 bench/two_nodes.py [--rounds 4] [--resolutions 1000] [--clients 8]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from fronts import public_copy, started_fronts  # noqa: E402
from postgres_server import PostgresServer, unavailable  # noqa: E402
from resolver_support import received  # noqa: E402
from test_two_nodes_e2e import TwoNodes  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=4, help="rounds of each (default 4)")
    parser.add_argument("--resolutions", type=int, default=1000, help="per round (1000)")
    parser.add_argument("--clients", type=int, default=8, help="concurrent users (8)")
    args = parser.parse_args()
    if reason := unavailable():
        print(f"bench/two_nodes.py: {reason}", file=sys.stderr)
        return 2
    server = PostgresServer().start()
    base = Path(tempfile.mkdtemp(prefix="bench-two-nodes-"))
    try:
        with public_copy() as public, started_fronts() as fronts:
            bed = TwoNodes(base, public, fronts, server.new_database())
            b = bed.nodes[1]
            number = 0

            def round_of(both: bool) -> float:
                nonlocal number
                bed.balance(both)
                asked_b = len(received(b.log(), "urlRequest"))
                numbers = range(number, number + args.resolutions)
                number += args.resolutions
                began = time.monotonic()
                results = bed.resolve_many(numbers, args.clients)
                rate = len(numbers) / (time.monotonic() - began)
                bad = [r for r in results if r[0] != 302]
                assert not bad, bad[:3]
                to_b = len(received(b.log(), "urlRequest")) - asked_b
                assert (to_b > 0) == both, f"node b got {to_b} urlRequests, both={both}"
                return rate

            round_of(True)  # warm-up: workers' caches, nginx's keepalive connections
            two, one = [], []
            for index in range(args.rounds):
                order = (True, False) if index % 2 == 0 else (False, True)
                for both in order:
                    (two if both else one).append(round_of(both))
            ratios = [t / o for t, o in zip(two, one)]
            print(
                f"{args.rounds} rounds of {args.resolutions} resolutions, "
                f"{args.clients} clients, ABBA"
            )
            print("| figure | two nodes ÷ one | two nodes | one node |")
            print("| --- | --- | --- | --- |")
            print(
                f"| resolutions/s (median) | {statistics.median(ratios):.2f}× "
                f"(each {' '.join(f'{r:.2f}' for r in ratios)}) "
                f"| {statistics.median(two):,.0f} /s | {statistics.median(one):,.0f} /s |"
            )
        return 0
    finally:
        from archive_service.common import postgres

        postgres.close_all()
        server.stop()
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
