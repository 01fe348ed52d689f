#!/usr/bin/env python3
"""What a resolution costs next to the floor of one urlRequest to one Archive, same run.

Starts the end-to-end bed of tests/resolver_support (resolver + Archives A and B as real
processes on loopback ports, B holding the 2012 next edition), then times sequentially:

  floor     one urlRequest straight to Archive A
  1 round   /8JMKD3MGP8W/35MMLL8              (2 urlRequests in parallel + 1 acknowledgment)
  2 rounds  /8JMKD3MGP8W/35MMLL8!:(oai_dc)    (4 urlRequests, 2 rounds + 1 acknowledgment)

Each latency twice: with the last resolution's acknowledgment answered before the next sample
(the resolver's /health counts; the floor's samples followed by the same /health requests), and
back to back, where resolution i's acknowledgment shares the Archive and the CPUs with
resolution i+1; beside the latter, the CPU each process (client, resolver, Archives) spent per
request. Then with 16 client threads (requests per second). Then includes three parties that accept
connections and never answer, and reports a resolution's time against --timeout: the
Archives are asked at once, so silent Archives cost one timeout together, not one each.

    python3 bench/resolver_rounds.py [--n 300]
"""

from __future__ import annotations

import argparse
import json
import os
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
from serve_process import children  # noqa: E402
from test_resolver_e2e import Bed  # noqa: E402


def cpu_seconds(pid: int) -> float:
    """User + system CPU of a process and its children alive now (gunicorn's workers)."""
    total = 0.0
    for each in (pid, *children(pid)):
        try:
            with open(f"/proc/{each}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
        except OSError:
            continue
        total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return total


def timed(
    url: str, n: int, servers: dict[str, int] | None = None, settle=None
) -> tuple[float, dict]:
    """Median latency of `n` GETs one after another; the CPU seconds per request of each of
    `servers` (name: pid), and of this client ("client"). `settle()`, when given, is called
    (untimed) after each GET: it returns once the work the GET left behind is done."""
    servers = servers or {}
    samples = []
    before = {name: cpu_seconds(pid) for name, pid in servers.items()}
    client = time.thread_time()
    for _ in range(n):
        start = time.perf_counter()
        status = http_get(url)[0]
        samples.append(time.perf_counter() - start)
        assert status in (200, 302, 404), status
        if settle is not None:
            settle()
    cpu = {"client": (time.thread_time() - client) / n}
    # A resolution's acknowledgment is sent after its redirect: let the last one be counted.
    time.sleep(0.3)
    for name, pid in servers.items():
        cpu[name] = (cpu_seconds(pid) - before[name]) / n
    return statistics.median(samples), cpu


class Acknowledged:
    """Waits until the resolver has sent every acknowledgment of the resolutions made so far
    (its /health counts), so that the next sample does not share the Archive with the last
    one's acknowledgment. The floor's samples are followed by the same /health requests."""

    def __init__(self, resolver: str):
        self.health = resolver + "/health"
        self.done = self._done()

    def _done(self) -> int:
        counts = json.loads(http_get(self.health)[2])["acknowledgments"]
        return counts["sent"] + counts["unexpected"] + counts["dropped"]

    def after(self, expected: int):
        def settle() -> None:
            self.done += expected
            deadline = time.monotonic() + 5
            while self._done() < self.done:
                if time.monotonic() > deadline:
                    raise AssertionError("an acknowledgment was not sent within 5 s")
                time.sleep(0.0005)

        return settle


def shown(cpu: dict) -> str:
    return ", ".join(f"{name} {seconds * 1e6:.0f}" for name, seconds in cpu.items())


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
            servers = {
                "resolver": bed.resolver.proc.pid,
                "Archive A": bed.a.process.proc.pid,
                "Archive B": bed.b.process.proc.pid,
            }
            for url in (floor, one, two):
                timed(url, 20)  # warm up
            # Each resolution ends with an acknowledgment sent after the redirect (§6.2),
            # which the floor has not: back to back, resolution i's acknowledgment shares the
            # Archive and the CPUs with resolution i+1 and is charged to it. The latency of
            # one resolution is measured with the last acknowledgment answered (both sides
            # followed by the same /health requests); back to back, beside it, with the CPU
            # every process spent per request (what the acknowledgment costs shows there).
            acked = Acknowledged(bed.url)
            f = timed(floor, args.n, settle=acked.after(0))[0]
            o = timed(one, args.n, settle=acked.after(1))[0]
            t = timed(two, args.n, settle=acked.after(1))[0]
            print(
                f"median latency, each acknowledged: floor {f * 1000:.2f} ms, "
                f"1 round {o * 1000:.2f} ms ({o / f:.2f}x floor), "
                f"2 rounds {t * 1000:.2f} ms ({t / f:.2f}x floor)"
            )
            (f, fc), (o, oc) = (timed(u, args.n, servers) for u in (floor, one))
            print(
                f"median latency, back to back: floor {f * 1000:.2f} ms, "
                f"1 round {o * 1000:.2f} ms ({o / f:.2f}x floor)"
            )
            print(f"CPU us per request, floor: {shown(fc)}")
            print(f"CPU us per request, 1 round: {shown(oc)}")
            resolver = oc["resolver"] / (fc["Archive A"] + fc["Archive B"])
            total = sum(oc.values()) / sum(fc.values())
            print(
                f"CPU per resolution, resolver alone / the floor's Archive: {resolver:.2f}x; "
                f"all processes (client, resolver, Archives) / the floor's: {total:.2f}x"
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
            slow = timed(one, 5)[0]
            print(f"with 3 silent Archives (timeout 1 s): 1 round {slow:.2f} s")
            for sock in hung:
                sock.close()
        finally:
            bed.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
