#!/usr/bin/env python3
"""Resolution latency while wrong-key inclusionRequests arrive (issue 15).

Starts the end-to-end bed of tests/resolver_support (resolver + Archives A and B as real
processes on loopback ports), then times `/8JMKD3MGP8W/35MMLL8` (one round, two Archives,
one acknowledgment) one request after another: first quiet, then while a flood sends
--rate inclusionRequests per second for Archive A with a wrong key (a new key each time,
open loop: a slow answer does not slow the flood), from one source address or, with
--sources N, from N loopback addresses 127.0.0.2… in turn. Also reports what one scrypt
check costs on this machine and how the flood was answered.

    python3 bench/resolver_flood.py [--rate 31] [--seconds 10] [--sources 1]
"""

from __future__ import annotations

import argparse
import http.client
import statistics
import sys
import tempfile
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from archive_service.resolver import registry as registrymod  # noqa: E402
from archive_service.resolver.archives import encode_query  # noqa: E402
from resolver_support import RESOLVER_IBI, SERVICE_A, http_get  # noqa: E402
from test_resolver_e2e import Bed  # noqa: E402

PURL = "/8JMKD3MGP8W/35MMLL8"


def scrypt_ms(n: int = 20) -> float:
    samples = []
    for i in range(n):
        start = time.perf_counter()
        registrymod._hash(f"{i:010d}", b"\0" * 16)
        samples.append(time.perf_counter() - start)
    return statistics.median(samples) * 1000


def latencies(url: str, seconds: float) -> list[float]:
    samples = []
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        start = time.perf_counter()
        status = http_get(url)[0]
        samples.append(time.perf_counter() - start)
        assert status == 302, status
        time.sleep(0.05)
    return samples


def summary(samples: list[float]) -> str:
    ordered = sorted(samples)
    p95 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.95))]
    return (
        f"median {statistics.median(ordered) * 1000:.1f} ms, p95 {p95 * 1000:.1f} ms, "
        f"max {ordered[-1] * 1000:.1f} ms over {len(ordered)}"
    )


def flood(
    resolver: str,
    archiveaddress: str,
    rate: float,
    sources: int,
    stop: threading.Event,
    answers: Counter,
) -> None:
    host, port = resolver.removeprefix("http://").rsplit(":", 1)

    def one(i: int) -> None:
        query = encode_query(
            {
                "servicesubject": "inclusionRequest",
                "archiveaddress": archiveaddress,
                "archiveserviceibi": SERVICE_A,
                "archiveip": "127.0.0.1",
                "archiveprotocol": "HTTP",
                "archiveplatformversion": "flood",
                "archiveadmemailaddress": "flood@example.org",
                "registrationkey": f"{4000000000 + i:010d}",
            }
        )
        source = "127.0.0.1" if sources == 1 else f"127.0.0.{2 + i % sources}"
        connection = http.client.HTTPConnection(
            host, int(port), timeout=30, source_address=(source, 0)
        )
        try:
            connection.request("GET", f"/{RESOLVER_IBI}?{query}")
            answers[connection.getresponse().status] += 1
        finally:
            connection.close()

    with ThreadPoolExecutor(64) as pool:
        start, i = time.monotonic(), 0
        while not stop.is_set():
            pool.submit(one, i)
            i += 1
            time.sleep(max(0.0, start + i / rate - time.monotonic()))


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rate", type=float, default=31)
    parser.add_argument("--seconds", type=float, default=10)
    parser.add_argument("--sources", type=int, default=1, choices=range(1, 254), metavar="1-253")
    args = parser.parse_args()
    print(f"scrypt check (n=2**14, r=8): {scrypt_ms():.1f} ms median")
    with tempfile.TemporaryDirectory() as tmp:
        bed = Bed(Path(tmp))
        bed.start()
        try:
            url = bed.url + PURL
            latencies(url, 1)  # warm up
            quiet = latencies(url, args.seconds)
            print(f"quiet:            {summary(quiet)}")
            stop, answers = threading.Event(), Counter()
            flooding = threading.Thread(
                target=flood, args=(bed.url, bed.a.address, args.rate, args.sources, stop, answers)
            )
            flooding.start()
            try:
                loud = latencies(url, args.seconds)
            finally:
                stop.set()
                flooding.join()
            print(f"{args.rate:g} wrong keys/s from {args.sources} source(s): {summary(loud)}")
            print(
                f"flood answered: {dict(sorted(answers.items()))} "
                f"(ratio of medians {statistics.median(loud) / statistics.median(quiet):.1f}x)"
            )
        finally:
            bed.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
