#!/usr/bin/env python3
"""First resolutions with a trickling Archive included, against the floor of the same bed
without it, same run (issue 30, finding 3).

Starts the end-to-end bed of tests/resolver_support (resolver + Archives A and B as real
processes on loopback ports) with `answered_ttl` 0, so every resolution is a first one (a
round to every included Archive). Then 8 clients resolve the persistent URLs of A's items
for --seconds:

  floor     A and B included
  trickle   a third Archive included that answers every request one byte every 0.5 s
            (each piece well within the timeout: it never times out, it never ends)

and reports resolutions per second, p50 and p95, for the trickle phase also after its first
--warmup seconds, as ratios against the floor.

    python3 bench/resolver_trickle.py [--seconds 10] [--warmup 3]
"""

from __future__ import annotations

import argparse
import socket
import statistics
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from resolver_support import E4E, LL8, http_get, service_call  # noqa: E402
from test_resolver_e2e import Bed  # noqa: E402

CLIENTS = 8
PATHS = ["/8JMKD3MGP8W/35MMLL8", "/8JMKD3MGP8W/35MME4E", f"/{LL8}", f"/{E4E}"]
TRICKLER = "sid.inpe.br/trickle/2020/01.01.00.00"


class Trickler:
    """Accepts every connection and answers each request a byte every `every` seconds."""

    def __init__(self, every: float = 0.5):
        self.every = every
        self.listener = socket.socket()
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(1024)
        self.address = f"127.0.0.1:{self.listener.getsockname()[1]}"
        self.stop = threading.Event()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self.stop.is_set():
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self._trickle, args=(conn,), daemon=True).start()

    def _trickle(self, conn: socket.socket) -> None:
        answer = b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n" + b"x" * 1000
        with conn:
            try:
                conn.recv(65536)
                for byte in answer:
                    if self.stop.wait(self.every):
                        return
                    conn.sendall(bytes([byte]))
            except OSError:
                return

    def close(self) -> None:
        self.stop.set()
        self.listener.close()


def load(url: str, seconds: float) -> list[tuple[float, float]]:
    """(start offset, latency) of every resolution of CLIENTS clients for `seconds`."""
    begin = time.monotonic()
    samples: list[tuple[float, float]] = []

    def client(n: int) -> None:
        i = n
        while time.monotonic() - begin < seconds:
            start = time.monotonic()
            status = http_get(url + PATHS[i % len(PATHS)])[0]
            samples.append((start - begin, time.monotonic() - start))
            assert status == 302, status
            i += 1

    with ThreadPoolExecutor(CLIENTS) as pool:
        list(pool.map(client, range(CLIENTS)))
    return samples


def figures(samples: list[tuple[float, float]], seconds: float) -> tuple[float, float, float]:
    """Resolutions per second, p50 and p95 in ms."""
    latencies = sorted(t for _, t in samples)
    cuts = statistics.quantiles(latencies, n=20)
    return len(latencies) / seconds, statistics.median(latencies) * 1000, cuts[18] * 1000


def show(name: str, figs, floor=None) -> None:
    rate, p50, p95 = figs
    line = f"{name:<26} {rate:7.1f}/s  p50 {p50:8.1f} ms  p95 {p95:8.1f} ms"
    if floor:
        line += f"   ({rate / floor[0]:.2f}x the floor's rate, p95 {p95 / floor[2]:.1f}x)"
    print(line, flush=True)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=10)
    parser.add_argument("--warmup", type=float, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        bed = Bed(Path(tmp))
        bed.resolver.args += ["--timeout", "2", "--answered-ttl", "0"]
        bed.start()
        trickler = Trickler()
        try:
            load(bed.url, 1)  # warm up
            floor = figures(load(bed.url, args.seconds), args.seconds)
            bed.registry.register(TRICKLER, "5555555555")
            service_call(
                bed.service,
                servicesubject="inclusionRequest",
                archiveaddress=trickler.address,
                archiveserviceibi=TRICKLER,
                archiveip="127.0.0.2",
                archiveprotocol="HTTP",
                archiveplatformversion="x",
                archiveadmemailaddress="a@b.example",
                registrationkey="5555555555",
            )
            samples = load(bed.url, args.seconds)
            late = [s for s in samples if s[0] >= args.warmup]
            print(f"8 clients, first resolutions, {args.seconds:g} s each")
            show("floor (A, B)", floor)
            show("with a trickler", figures(samples, args.seconds), floor)
            show(
                f"  after the first {args.warmup:g} s",
                figures(late, args.seconds - args.warmup),
                floor,
            )
        finally:
            trickler.close()
            bed.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
