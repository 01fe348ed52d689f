"""What recording COUNTER uses costs a download (issue 20): /col/ throughput of `serve` with
the uses buffered and written in batches (the code), against the same server with
`record_use` a no-op (the floor), and with a write per use (each use flushed at once: how
uses were recorded before the batches), in the same run, rounds interleaved.

    python bench/counter_downloads.py [--rounds 3] [--duration 10] [--connections 16]

The sample collection, 2 workers (serve's defaults otherwise), wrk on one small file; the
modes are switched by a `sitecustomize` on the servers' PYTHONPATH, the code unchanged.
"""

from __future__ import annotations

import argparse
import os
import signal
import sqlite3
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

FILE = "/col/iconet.com.br/banon/2009/09.09.22.01/doc/reference.bib"
HOOKS = {
    "off": "s.Statistics.record_use = lambda self, seen: None\n",
    "batched": "",
    "each": (
        "_record = s.Statistics.record_use\n"
        "def record_use(self, seen):\n"
        "    _record(self, seen)\n"
        "    self.flush()\n"
        "s.Statistics.record_use = record_use\n"
    ),
}


def cpu_seconds(pids: list[int]) -> float:
    """User and system CPU time of `pids` so far (their own, not their children's)."""
    total = 0
    for pid in pids:
        with open(f"/proc/{pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
        total += int(fields[11]) + int(fields[12])  # utime, stime
    return total / os.sysconf("SC_CLK_TCK")


def measure(
    mode: str, tmp: Path, duration: float, connections: int
) -> tuple[float, int, int, float]:
    """(requests a second, requests served, uses recorded, workers' CPU µs a request) of one
    server in `mode`: the CPU time is the steadier figure on a shared machine."""
    hook = tmp / f"hook-{mode}"
    hook.mkdir(exist_ok=True)
    (hook / "sitecustomize.py").write_text(
        "import archive_service.stores.stats as s\n" + HOOKS[mode]
    )
    state = Path(tempfile.mkdtemp(dir=tmp, prefix=f"state-{mode}-"))
    port = run.free_port()
    env = run.child_env()
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), str(hook)])
    cmd = [sys.executable, "-m", "archive_service.cli", "serve", "--collection"]
    cmd += [str(ROOT / "sample_collection"), "--state-dir", str(state), "--no-announce"]
    cmd += ["--workers", "2", "--bind", f"127.0.0.1:{port}", "--archiveaddress"]
    cmd += [f"127.0.0.1:{port}", "--stats-retention-days", "0"]
    with open(tmp / f"serve-{mode}.log", "ab") as log:
        proc = subprocess.Popen(
            cmd, stdout=subprocess.DEVNULL, stderr=log, env=env, start_new_session=True
        )
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if loadgen.fetch(port, FILE)[0] == 200:
                    break
            except OSError:
                pass
            if time.monotonic() > deadline or proc.poll() is not None:
                raise RuntimeError(f"serve ({mode}) did not answer; see {tmp}/serve-{mode}.log")
            time.sleep(0.05)
        loadgen.peak(port, [FILE], 2, connections)  # warm-up
        workers = run.children(proc.pid)
        before = cpu_seconds(workers)
        got = loadgen.peak(port, [FILE], duration, connections)
        cpu = (cpu_seconds(workers) - before) / got["requests"] * 1e6
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(60)
    uses = 0
    if (state / "stats.sqlite3").exists():
        with sqlite3.connect(state / "stats.sqlite3") as conn:
            (uses,) = conn.execute("SELECT count(*) FROM uses").fetchone()
        conn.close()
    return got["rate"], got["requests"], uses, cpu


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--duration", type=float, default=10)
    parser.add_argument("--connections", type=int, default=16)
    args = parser.parse_args()
    rates: dict[str, list[float]] = {mode: [] for mode in HOOKS}
    cpus: dict[str, list[float]] = {mode: [] for mode in HOOKS}
    with tempfile.TemporaryDirectory(prefix="bench-counter-") as name:
        tmp = Path(name)
        for round_ in range(args.rounds):
            for mode in HOOKS:
                rate, served, uses, cpu = measure(mode, tmp, args.duration, args.connections)
                rates[mode].append(rate)
                cpus[mode].append(cpu)
                print(
                    f"round {round_ + 1} {mode:>7}: {rate:8.0f} req/s, {cpu:6.1f} µs of the "
                    f"workers' CPU a download, {served:,} downloads (and the warm-up's), "
                    f"{uses:,} uses written",
                    flush=True,
                )
    floor = statistics.median(rates["off"])
    for mode in HOOKS:
        median = statistics.median(rates[mode])
        # On a shared machine a round's three runs are closer in time than two rounds: the
        # ratio within each round is the steadier figure.
        paired = [r / f for r, f in zip(rates[mode], rates["off"], strict=True)]
        print(
            f"{mode:>7}: median {median:.0f} req/s "
            f"({', '.join(f'{r:.0f}' for r in rates[mode])}), {median / floor:.2f}x the floor; "
            f"within rounds {', '.join(f'{r:.2f}' for r in paired)}x, "
            f"median {statistics.median(paired):.2f}x"
        )
    base = statistics.median(cpus["off"])
    for mode in HOOKS:
        cpu = statistics.median(cpus[mode])
        print(
            f"{mode:>7}: workers' CPU a download, median {cpu:.1f} µs "
            f"({', '.join(f'{c:.1f}' for c in cpus[mode])}), {cpu - base:+.1f} µs over the floor, "
            f"throughput the CPU allows {base / cpu:.2f}x the floor's"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
