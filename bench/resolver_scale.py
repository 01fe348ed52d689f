#!/usr/bin/env python3
"""A resolution's cost as the number of included Archives grows (issue 24), next to the floor
of one urlRequest straight to the Archive that holds the item, in the same run.

Real processes on loopback: `archive-service resolver serve` (1 worker x 16 threads, timeout
1 s) and one `archive-service serve` Archive (A of tests/resolver_support, which joins
through its own inclusionRequest); the other Archives are fakes (bench/fake_archives.py) that
answer every urlRequest with an empty list, written straight into the registry as included.

    python3 bench/resolver_scale.py [--n 200] [--archives 1,41] [--simulate 1000]

For each count of included Archives: sequential medians of the floor and of one resolution of
/8JMKD3MGP8W/35MMLL8 (taken in turn, so drift hits both), and requests per second with 16
client threads. `--simulate N`: N fake Archives of which a few are slow (0.3 s) and a few
silent, p50/p99 of a resolution with a warm cache (the same IBI again) and a cold one (a
second resolver on the same registry with `answered_ttl` 0, which never remembers).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import closing
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from archive_service.resolver.config import REGISTRY_FILE  # noqa: E402
from archive_service.resolver.registry import Registry  # noqa: E402
from resolver_support import (  # noqa: E402
    KEY_A,
    RESOLVER_IBI,
    SERVICE_A,
    build_collections,
    included_archive_config,
)
from serve_process import Process, free_port, http_get, wait_until  # noqa: E402

PURL = "/8JMKD3MGP8W/35MMLL8"
FAKE = "fake.example/bench/2020/01.01.00.00.{:05d}"


def once(url: str) -> float:
    start = time.perf_counter()
    status = http_get(url)[0]
    took = time.perf_counter() - start
    assert status in (200, 302, 404), (status, url)
    return took


def medians(urls: list[str], n: int) -> list[float]:
    """Sequential medians, the URLs taken in turn (ABBA) so a drift hits all of them."""
    samples: list[list[float]] = [[] for _ in urls]
    for i in range(n):
        order = list(range(len(urls)))
        if i % 2:
            order.reverse()
        for k in order:
            samples[k].append(once(urls[k]))
    return [statistics.median(s) for s in samples]


def percentiles(url: str, n: int) -> tuple[float, float]:
    samples = sorted(once(url) for _ in range(n))
    return statistics.median(samples), samples[min(len(samples) - 1, int(len(samples) * 0.99))]


def rate(url: str, n: int, threads: int = 16) -> float:
    start = time.perf_counter()
    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(lambda _: once(url), range(n)))
    return n / (time.perf_counter() - start)


class Fakes:
    """bench/fake_archives.py as a child process, and its Archives in the registry."""

    def __init__(self, registry: Path, empty: int, slow: int = 0, silent: int = 0):
        self.process = subprocess.Popen(
            [
                sys.executable,
                str(ROOT / "bench" / "fake_archives.py"),
                *("--empty", str(empty), "--slow", str(slow), "--silent", str(silent)),
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        self.ports = json.loads(self.process.stdout.readline())
        self.registry = registry
        ports = self.ports["empty"] + self.ports["slow"] + self.ports["silent"]
        # Written straight into the registry: scrypt for a thousand registrations would take
        # a minute and tell nothing about resolving.
        with closing(sqlite3.connect(registry)) as db, db:
            db.executemany(
                "INSERT INTO archive (ibikey, serviceibi, salt, keyhash, registered, included, "
                "address, confirmation) VALUES (?, ?, x'00', x'00', '', 1, ?, 'successful')",
                [
                    (FAKE.format(i).lower(), FAKE.format(i), f"127.0.0.1:{port}")
                    for i, port in enumerate(ports)
                ],
            )

    def close(self) -> None:
        with closing(sqlite3.connect(self.registry)) as db, db:
            db.execute("DELETE FROM archive WHERE ibikey LIKE 'fake.example/%'")
        self.process.stdin.close()
        self.process.wait(10)


def start_resolver(state: Path, base: Path, name: str, *extra: str) -> tuple[Process, str]:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    resolver = Process(
        [
            "resolver",
            "serve",
            *("--state-dir", str(state), "--bind", f"127.0.0.1:{port}", "--timeout", "1"),
            *extra,
        ],
        base / f"{name}.log",
    )
    resolver.start()
    resolver.wait_answering(url + "/")
    return resolver, url


def start_archive(base: Path, collection: Path, service_url: str) -> tuple[Process, str]:
    port = free_port()
    address = f"127.0.0.1:{port}"
    config = included_archive_config(
        base / "A.yaml",
        collection=collection,
        address=address,
        service=SERVICE_A,
        key=KEY_A,
        resolver=service_url,
        state=base / "state-A",
    )
    archive = Process(["serve", "--config", str(config)], base / "A.log")
    archive.start()
    archive.wait_answering(
        f"http://{address}/{SERVICE_A}?servicesubject=inclusionConfirmationRequest"
    )
    return archive, address


def start_bed(base: Path, running: list[Process]) -> tuple[Path, str, str]:
    """Archive A included in a resolver of its own, on loopback: the resolver's state
    directory, its URL and A's address. Each process goes into `running` as it starts, for
    the caller to stop."""
    state = base / "resolver-state"
    Registry(state).register(SERVICE_A, KEY_A)
    collection, _ = build_collections(base)
    resolver, url = start_resolver(state, base, "resolver")
    running.append(resolver)
    archive, address = start_archive(base, collection, f"{url}/{RESOLVER_IBI}")
    running.append(archive)
    wait_until(lambda: any(r.included for r in Registry(state).records()), what="A included")
    return state, url, address


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=200)
    parser.add_argument("--archives", default="1,41", help="counts of included Archives")
    parser.add_argument("--simulate", type=int, default=0, help="fake Archives (e.g. 1000)")
    parser.add_argument("--logs", help="directory to copy the processes' logs to")
    args = parser.parse_args()
    results: dict = {"cpus": os.cpu_count()}
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        running: list[Process] = []
        try:
            state, url, address = start_bed(base, running)
            registry = state / REGISTRY_FILE
            floor = (
                f"http://{address}/{SERVICE_A}?servicesubject=urlRequest&"
                "clientinformation.ipaddress=127.0.0.1&parsedibiurl.ibi=8JMKD3MGP8W/35MMLL8"
            )
            one = url + PURL
            for count in (int(c) for c in args.archives.split(",")):
                fakes = Fakes(registry, count - 1) if count > 1 else None
                try:
                    medians([floor, one], 20)  # warm up
                    f, o = medians([floor, one], args.n)
                    rf, ro = rate(floor, args.n * 2), rate(one, args.n * 2)
                finally:
                    if fakes:
                        fakes.close()
                results[f"included_{count}"] = {
                    "floor_ms": round(f * 1000, 2),
                    "resolution_ms": round(o * 1000, 2),
                    "latency_ratio": round(o / f, 2),
                    "floor_rps_16": round(rf),
                    "resolution_rps_16": round(ro),
                    "throughput_share": round(ro / rf, 2),
                }
                print(
                    f"{count:5d} included: floor {f * 1000:.2f} ms, resolution "
                    f"{o * 1000:.2f} ms ({o / f:.1f}x); 16 clients: floor {rf:.0f}/s, "
                    f"resolution {ro:.0f}/s ({ro / rf:.2f} of the floor)",
                    flush=True,
                )
            if args.simulate:
                slow = silent = max(1, args.simulate // 200)
                fakes = Fakes(registry, args.simulate - slow - silent, slow, silent)
                cold, cold_url = start_resolver(state, base, "cold", "--answered-ttl", "0")
                running.append(cold)
                try:
                    f = medians([floor], 50)[0]
                    once(one)  # fills the cache of the warm resolver
                    # The cold one's first resolutions open its thousand connections and
                    # meet the silent Archives (asked last for 60 s after): not measured.
                    for _ in range(3):
                        once(cold_url + PURL)
                    time.sleep(1.2)
                    warm = percentiles(one, args.n)
                    cold_p = percentiles(cold_url + PURL, max(20, args.n // 3))
                finally:
                    fakes.close()
                results[f"simulate_{args.simulate}"] = {
                    "slow": slow,
                    "silent": silent,
                    "floor_ms": round(f * 1000, 2),
                    "warm_p50_ms": round(warm[0] * 1000, 1),
                    "warm_p99_ms": round(warm[1] * 1000, 1),
                    "cold_p50_ms": round(cold_p[0] * 1000, 1),
                    "cold_p99_ms": round(cold_p[1] * 1000, 1),
                }
                print(
                    f"{args.simulate + 1} included ({slow} slow 0.3 s, {silent} silent, "
                    f"timeout 1 s): floor {f * 1000:.2f} ms; warm p50 {warm[0] * 1000:.1f} "
                    f"ms p99 {warm[1] * 1000:.1f} ms; cold p50 {cold_p[0] * 1000:.1f} ms "
                    f"p99 {cold_p[1] * 1000:.1f} ms",
                    flush=True,
                )
        finally:
            for process in reversed(running):
                process.stop()
            if args.logs:
                Path(args.logs).mkdir(parents=True, exist_ok=True)
                for log in base.glob("*.log"):
                    shutil.copy(log, args.logs)
    print(json.dumps(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
