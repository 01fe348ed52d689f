#!/usr/bin/env python3
"""How long the Archive's membership takes to move from one node to another (issue 19).

Starts a throwaway PostgreSQL cluster (tests/postgres_server.py), the reference resolver and
two `serve` nodes of one Archive on it (the classes of tests/test_membership.py), then, in
turn, takes the holder away in one of three ways and times, from that moment, until the
standby has recorded `included` (its inclusionRequest answered by the resolver, confirmation
included); a new standby node is started after each round:

- `kill master`: SIGKILL to the holder's gunicorn master (its announcer notices and exits);
- `kill node`: SIGKILL to every process of the holder at once (the announcer's connection
  drops with it, as when the whole machine's processes die);
- `stop`: SIGTERM, the hand-over of a node stopped for maintenance.

    python3 bench/membership.py [--rounds 5]
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from postgres_server import PostgresServer, unavailable  # noqa: E402
from test_membership import Node, Resolver  # noqa: E402

WAYS = ("kill master", "kill node", "stop")


def take_away(node: Node, way: str) -> None:
    if way == "kill master":
        node.serve.process.send_signal(signal.SIGKILL)
    elif way == "kill node":
        for pid in node.processes():
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
    else:
        node.serve.process.send_signal(signal.SIGTERM)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5, help="rounds of each way (default 5)")
    args = parser.parse_args()
    if reason := unavailable():
        print(f"bench/membership.py: {reason}", file=sys.stderr)
        return 2
    server = PostgresServer().start()
    base = Path(tempfile.mkdtemp(prefix="bench-membership-"))
    started: list[Node] = []
    resolver = None
    try:
        database = server.new_database()
        resolver = Resolver(base)

        def node() -> Node:
            started.append(Node(base, f"n{len(started)}", resolver, database))
            return started[-1]

        holder = node()
        holder.wait_state("included", timeout=60)
        standby = node()
        standby.wait_state("standby", timeout=60)
        times: dict[str, list[float]] = {way: [] for way in WAYS}
        for _ in range(args.rounds):
            for way in WAYS:
                tree = holder.processes()
                began = time.monotonic()
                take_away(holder, way)
                standby.wait_state("included", timeout=60)
                times[way].append(time.monotonic() - began)
                holder.serve.process.wait(60)
                for pid in tree:  # what a SIGKILLed master leaves: workers see it in ~1 s
                    try:
                        os.kill(pid, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
                holder, standby = standby, node()
                standby.wait_state("standby", timeout=60)
        excluded = resolver.received("exclusionRequest")
        print(f"{args.rounds} rounds of each way; exclusionRequests received: {excluded}")
        print("| holder taken away by | median s | max s | each s |")
        print("| --- | --- | --- | --- |")
        for way, samples in times.items():
            each = " ".join(f"{s:.2f}" for s in samples)
            print(f"| {way} | {statistics.median(samples):.2f} | {max(samples):.2f} | {each} |")
        return 0
    finally:
        for each in started:
            each.serve.kill()
        if resolver is not None:
            resolver.process.kill()
        server.stop()
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
