#!/usr/bin/env python3
"""What a resolution costs next to the floor of one urlRequest to one Archive, same run.

Starts the end-to-end bed of tests/resolver_support (resolver + Archives A and B as real
processes on loopback ports, B holding the 2012 next edition), then times sequentially:

  floor     one urlRequest straight to Archive A
  1 round   /8JMKD3MGP8W/35MMLL8              (2 urlRequests in parallel + 1 acknowledgment)
  2 rounds  /8JMKD3MGP8W/35MMLL8!:(oai_dc)    (4 urlRequests, 2 rounds + 1 acknowledgment)

and with 16 client threads (requests per second). Then includes three parties that accept
connections and never answer, and reports a resolution's time against --timeout: the
Archives are asked at once, so silent Archives cost one timeout together, not one each.

    python3 bench/resolver_rounds.py [--n 300]
"""

from __future__ import annotations

import argparse
import socket
import statistics
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from resolver_support import http_get, service_call  # noqa: E402
from test_resolver_e2e import Bed  # noqa: E402


def timed(url: str, n: int) -> float:
    samples = []
    for _ in range(n):
        start = time.perf_counter()
        status = http_get(url)[0]
        samples.append(time.perf_counter() - start)
        assert status in (200, 302, 404), status
    return statistics.median(samples)


def rate(url: str, n: int, threads: int = 16) -> float:
    start = time.perf_counter()
    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(lambda _: http_get(url), range(n)))
    return n / (time.perf_counter() - start)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=300)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        bed = Bed(Path(tmp))
        bed.resolver.args += ["--timeout", "1"]
        bed.start()
        try:
            floor = (
                f"http://{bed.a.address}/{bed.a.service}?servicesubject=urlRequest&"
                "clientinformation.ipaddress=127.0.0.1&parsedibiurl.ibi=8JMKD3MGP8W/35MMLL8"
            )
            one = bed.url + "/8JMKD3MGP8W/35MMLL8"
            two = bed.url + "/8JMKD3MGP8W/35MMLL8!:(oai_dc)"
            for url in (floor, one, two):
                timed(url, 20)  # warm up
            f, o, t = (timed(u, args.n) for u in (floor, one, two))
            print(
                f"median latency: floor {f * 1000:.2f} ms, 1 round {o * 1000:.2f} ms "
                f"({o / f:.1f}x floor), 2 rounds {t * 1000:.2f} ms ({t / f:.1f}x floor)"
            )
            rf, ro = rate(floor, args.n), rate(one, args.n)
            print(
                f"16 clients: floor {rf:.0f} req/s, 1 round {ro:.0f} req/s ({rf / ro:.1f}x fewer)"
            )

            # Three parties that accept connections and never answer: asked at once, they
            # cost one timeout together (asked one after another they would cost three).
            hung = []
            for i in range(3):
                sock = socket.socket()
                sock.bind(("127.0.0.1", 0))
                sock.listen(64)
                hung.append(sock)
                ibi = f"sid.inpe.br/hung/2020/01.01.00.0{i}"
                bed.registry.register(ibi, "5555555555")
                service_call(
                    bed.service,
                    servicesubject="inclusionRequest",
                    archiveaddress=f"127.0.0.1:{sock.getsockname()[1]}",
                    archiveserviceibi=ibi,
                    archiveip="127.0.0.1",
                    archiveprotocol="HTTP",
                    archiveplatformversion="x",
                    archiveadmemailaddress="a@b.example",
                    registrationkey="5555555555",
                )
            slow = timed(one, 5)
            print(f"with 3 silent Archives (timeout 1 s): 1 round {slow:.2f} s")
            for sock in hung:
                sock.close()
        finally:
            bed.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
