"""What the Prometheus metrics cost the protocol (issue 36: urlRequest throughput with metrics
on ≥ 0.97x metrics off): `serve` as it is (metrics_allow's default, loopback: every request
counted by web/metrics.py in prometheus_client's multiprocess files) against the same server
with `--metrics-allow none` (no middleware, nothing counted: the floor), rounds interleaved.

    python bench/metrics_cost.py [--rounds 3] [--pairs 10] [--duration 2] [--connections 4]
    python bench/metrics_cost.py --in-process [--rounds 3]

The sample collection, 2 workers (serve's defaults otherwise), wrk (or the Python load
generator) on one urlRequest. Prints the load average before each round: the machine is shared.
On a loaded machine the servers' throughput swings more than the cost measured: `--in-process`
calls the two apps' WSGI callables in one process instead (the multiprocess mode on, as under
serve), alternating blocks of urlRequests, and compares the CPU time of each pair of blocks.
"""

from __future__ import annotations

import argparse
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
sys.path.insert(0, str(BENCH))

import loadgen  # noqa: E402
import run  # noqa: E402
from counter_downloads import cpu_seconds  # noqa: E402

SERVICE = "sid.inpe.br/mtc-m18@80/2008/03.17.15.17"
PATH = (
    f"/{SERVICE}?servicesubject=urlRequest&clientinformation.ipaddress=150.163.2.175"
    "&parsedibiurl.ibi=LK47B6W/362SFKH"
)
MODES = {"off": ["--metrics-allow", "none"], "on": []}


def start(mode: str, tmp: Path) -> tuple[subprocess.Popen, int]:
    """`serve` in `mode`, answering; (process, port)."""
    state = Path(tempfile.mkdtemp(dir=tmp, prefix=f"state-{mode}-"))
    port = run.free_port()
    cmd = [sys.executable, "-m", "archive_service.cli", "serve", "--collection"]
    cmd += [str(ROOT / "sample_collection"), "--state-dir", str(state), "--no-announce"]
    cmd += ["--workers", "2", "--bind", f"127.0.0.1:{port}", "--archiveaddress"]
    cmd += [f"127.0.0.1:{port}", "--archiveserviceibi", SERVICE, *MODES[mode]]
    with open(tmp / f"serve-{mode}.log", "ab") as log:
        proc = subprocess.Popen(
            cmd, stdout=subprocess.DEVNULL, stderr=log, env=run.child_env(), start_new_session=True
        )
    deadline = time.monotonic() + 120
    while True:
        try:
            if loadgen.fetch(port, PATH)[0] == 200:
                return proc, port
        except OSError:
            pass
        if time.monotonic() > deadline or proc.poll() is not None:
            raise RuntimeError(f"serve ({mode}) did not answer; see {tmp}/serve-{mode}.log")
        time.sleep(0.05)


def burst(proc: subprocess.Popen, port: int, duration: float, connections: int):
    """(requests a second, workers' CPU µs a request) of one burst of urlRequests."""
    workers = run.children(proc.pid)
    before = cpu_seconds(workers)
    got = loadgen.peak(port, [PATH], duration, connections)
    if got["failed"]:
        raise RuntimeError(f"{got['failed']} requests failed")
    return got["rate"], (cpu_seconds(workers) - before) / got["requests"] * 1e6


def servers(rounds: int, pairs: int, duration: float, connections: int) -> None:
    """Both servers up at once, bursts alternated ABBA: a pair's two bursts are seconds apart,
    so the machine's load moves less between them than between two servers' runs."""
    with tempfile.TemporaryDirectory(prefix="bench-metrics-") as name:
        tmp = Path(name)
        up = {mode: start(mode, tmp) for mode in MODES}
        try:
            for _, port in up.values():
                loadgen.peak(port, [PATH], 2, connections)  # warm-up
            for round_ in range(rounds):
                load = " ".join(Path("/proc/loadavg").read_text().split()[:3])
                rates, cpus = [], []
                for k in range(pairs):
                    order = ("off", "on") if k % 2 == 0 else ("on", "off")
                    got = {mode: burst(*up[mode], duration, connections) for mode in order}
                    rates.append(got["on"][0] / got["off"][0])
                    cpus.append(got["off"][1] / got["on"][1])
                print(
                    f"round {round_ + 1} (load {load}): throughput on/off, median of {pairs} "
                    f"pairs {statistics.median(rates):.3f}x; throughput the workers' CPU a "
                    f"request allows {statistics.median(cpus):.3f}x (target ≥ 0.97x)",
                    flush=True,
                )
            _, port = up["on"]
            status, body = loadgen.fetch(port, "/metrics")  # counted, all of them
            assert status == 200 and b"archive_service_protocol_requests_total" in body
        finally:
            for proc, _ in up.values():
                proc.send_signal(signal.SIGTERM)
                proc.wait(60)


def in_process(rounds: int, block: int = 500, pairs: int = 40) -> None:
    """CPU time of `block` urlRequests through each app's WSGI callable, blocks alternated;
    per round the median of the pairs' ratios (on's rate over off's)."""
    tmp = Path(tempfile.mkdtemp(prefix="bench-metrics-"))
    from archive_service.common import metrics

    metrics.use_directory(str(tmp), "metrics")  # before any metric is made, as serve's master
    from archive_service.web import create_app

    base = {
        "collection": str(ROOT / "sample_collection"),
        "archiveaddress": "127.0.0.1:8080",
        "archiveserviceibi": SERVICE,
        "state_dir": str(tmp / "state"),
        "resolver": "none",
    }
    apps = {mode: create_app({**base, "metrics_allow": allow}) for mode, allow in ALLOW.items()}
    path, query = PATH.split("?")
    environ = {"REQUEST_METHOD": "GET", "PATH_INFO": path, "QUERY_STRING": query}
    environ |= {"SERVER_NAME": "127.0.0.1", "SERVER_PORT": "8080", "REMOTE_ADDR": "127.0.0.1"}
    environ |= {"wsgi.url_scheme": "http", "SCRIPT_NAME": ""}

    def cpu_of(app) -> float:
        began = time.process_time()
        for _ in range(block):
            b"".join(app(dict(environ), lambda status, headers, exc=None: None))
        return time.process_time() - began

    for app in apps.values():
        cpu_of(app)  # warm-up
    for round_ in range(rounds):
        load = " ".join(Path("/proc/loadavg").read_text().split()[:3])
        ratios, cpus = [], {mode: [] for mode in apps}
        for _ in range(pairs):
            got = {mode: cpu_of(app) for mode, app in apps.items()}
            for mode, seconds in got.items():
                cpus[mode].append(seconds / block * 1e6)
            ratios.append(got["off"] / got["on"])
        off, on = statistics.median(cpus["off"]), statistics.median(cpus["on"])
        print(
            f"round {round_ + 1} (load {load}): CPU a urlRequest off {off:.1f} µs, on {on:.1f} µs "
            f"({on - off:+.1f} µs); throughput on/off, median of {pairs} pairs: "
            f"{statistics.median(ratios):.3f}x (target ≥ 0.97x)",
            flush=True,
        )


ALLOW = {"off": "none", "on": "127.0.0.0/8"}


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--in-process", action="store_true")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--pairs", type=int, default=10)
    parser.add_argument("--duration", type=float, default=2, help="seconds a burst")
    parser.add_argument("--connections", type=int, default=4)
    args = parser.parse_args()
    if args.in_process:
        in_process(args.rounds)
        return 0
    servers(args.rounds, args.pairs, args.duration, args.connections)
    return 0


if __name__ == "__main__":
    sys.exit(main())
