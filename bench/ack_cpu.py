#!/usr/bin/env python3
"""The Archive's CPU for one acknowledgment ÷ its CPU for one urlRequest, same run (issue 35).

Starts the end-to-end bed of tests/resolver_support (the resolver and Archives A and B as real
processes on loopback; A's `serve` has one worker), asks A for `--n` urlRequests to collect
fresh urlkeys, then, in `--rounds` alternating rounds, sends A `--n` urlRequests (the floor)
and `--n` acknowledgments of those keys (each a fresh head: counted, the common case), one
after another from 127.0.0.1 (within `resolver_networks`: they count). The figure is the CPU
A's processes spent (user + system from /proc, the master and its worker, the COUNTER
writer's thread included) per request, and its ratio; the target is ≤ 1×.

    python3 bench/ack_cpu.py [--n 300] [--rounds 3]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import urlencode

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests"), str(ROOT / "bench")]

from resolver_rounds import cpu_seconds  # noqa: E402

from archive_service.protocol import pairs  # noqa: E402
from resolver_support import http_get  # noqa: E402
from test_resolver_e2e import Bed  # noqa: E402

IBI = "8JMKD3MGP8W/35MMLL8"
ASK = {
    "servicesubject": "urlRequest",
    "clientinformation.ipaddress": "127.0.0.1",
    "parsedibiurl.ibi": IBI,
}


def acknowledgment(answer: bytes) -> str:
    """The acknowledgment the resolver would send for the answer's first URL."""
    got = dict(pairs.parse(answer.decode()))
    return urlencode(
        {
            "servicesubject": "acknowledgment",
            "clientinformation.ipaddress": "127.0.0.1",
            "contenttype": got.get("contenttype") or "Data",
            "url": got["url"],
            "url.persistent": f"http://127.0.0.1/{IBI}",
            "urlkey": got["urlkey"],
        }
    )


def cpu_per_request(pid: int, urls: list[str]) -> tuple[float, float]:
    """(CPU seconds of `pid` and its children per GET, median latency), the GETs one after
    another; the COUNTER writer's batch (at most a second later) is waited for."""
    before = cpu_seconds(pid)
    samples = []
    for url in urls:
        start = time.perf_counter()
        status = http_get(url)[0]
        samples.append(time.perf_counter() - start)
        assert status == 200, status
    time.sleep(1.3)  # the buffered COUNTER uses are written within a second
    return (cpu_seconds(pid) - before) / len(urls), statistics.median(samples)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        bed = Bed(Path(tmp))
        bed.start()
        try:
            base = f"http://{bed.a.address}/{bed.a.service}?"
            ask = base + urlencode(ASK)
            pid = bed.a.process.proc.pid
            for _ in range(50):  # warm up both paths
                http_get(base + acknowledgment(http_get(ask)[2]))
            ratios = []
            for n in range(args.rounds):
                acks = [base + acknowledgment(http_get(ask)[2]) for _ in range(args.n)]
                time.sleep(1.3)
                floor, floor_latency = cpu_per_request(pid, [ask] * args.n)
                ack, ack_latency = cpu_per_request(pid, acks)
                ratios.append(ack / floor)
                with open("/proc/loadavg") as f:
                    load = f.read().split()[0]
                print(
                    f"round {n + 1} (load {load}): Archive CPU a urlRequest {floor * 1e6:.0f} us, "
                    f"an acknowledgment {ack * 1e6:.0f} us ({ack / floor:.2f}x); median latency "
                    f"{floor_latency * 1e3:.2f} / {ack_latency * 1e3:.2f} ms"
                )
            print(
                f"acknowledgment / urlRequest, Archive CPU: median {statistics.median(ratios):.2f}x"
            )
        finally:
            bed.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
