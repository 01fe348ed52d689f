#!/usr/bin/env python3
"""Benchmarks of archive-service against floors measured in the same run (issue 7).

    python bench/run.py --items 100000                 one size, every figure
    python bench/run.py --items 10000,100000,1000000   the three sizes of the results table
    python bench/run.py --items 200 --smoke            seconds; what CI runs

Each figure is a ratio of the subject to its floor, measured side by side, alternating the two
(ABBA order), as the median of the per-round ratios: absolute times on a shared machine drift,
ratios measured back to back do not drift much. Results of each size are kept as JSON in
bench/results/ and the table in bench/RESULTS.md (and README.md, if it has the markers) is
regenerated from all of them. See bench/README.md for what each figure means.

The service is driven only through stable entry points: `archive-service serve` as a real
process, `archive-service index` when it exists (else `archive_service.collection.items.scan`).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import quote, urlencode

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
sys.path.insert(0, str(BENCH))

import gen  # noqa: E402
import loadgen  # noqa: E402
import report  # noqa: E402
from removal import removal  # noqa: E402

SERVICE_IBI = "sid.inpe.br/mtc-m18@80/2008/03.17.15.17"
# The full answer: follow the edition chain, every translation, and each one's metadata.
FULL_VERBS = "GetLastEdition GetTranslation GetMetadata(oai_dc)"
FULL_MARK = b"url.lastedition.translation"
WORKERS = 2


def log(message: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


@dataclass
class Profile:
    runs: int  # cold build and warm start rounds (each round: floor + subject)
    rounds: int  # throughput and latency rounds
    duration: float  # seconds per side per throughput round
    latency_duration: float
    edits: int
    edit_timeout: float
    warmup: float


def profile_for(items: int, args: argparse.Namespace) -> Profile:
    if args.smoke:
        prof = Profile(
            runs=1, rounds=1, duration=1, latency_duration=0.5, edits=2, edit_timeout=1, warmup=0
        )
    else:
        prof = Profile(
            runs=3 if items >= 1_000_000 else 5,
            rounds=5,
            duration=5,
            latency_duration=8,
            edits=200,
            edit_timeout=10,
            warmup=1,
        )
    if args.single:
        prof.runs = 1
    if args.runs:
        prof.runs = args.runs
    if args.rounds:
        prof.rounds = args.rounds
    if args.duration:
        prof.duration = args.duration
    if args.edits is not None:
        prof.edits = args.edits
    return prof


def median(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def child_env() -> dict:
    env = dict(os.environ)
    # Measure this checkout's code, whatever else is installed.
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    for name in list(env):
        if name.startswith("ARCHIVE_SERVICE_"):
            del env[name]
    return env


def url_request(ibi: str, verbs: str | None = None) -> str:
    params = {
        "servicesubject": "urlRequest",
        "clientinformation.ipaddress": "150.163.2.174",
        "parsedibiurl.ibi": ibi,
    }
    if verbs:
        params["parsedibiurl.verblist"] = verbs
    return f"/{SERVICE_IBI}?" + urlencode(params, quote_via=quote)


def git(*args: str) -> str:
    try:
        return subprocess.run(
            ["git", "-C", str(ROOT), *args], capture_output=True, text=True, check=True
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return ""


def worker_model() -> str:
    """What serve's gunicorn workers are in the measured code (threads came with issue 15)."""
    code = (
        "from archive_service import settings; "
        "print(next(s.default for s in settings.SETTINGS if s.name == 'threads'))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=child_env()
    )
    threads = done.stdout.strip()
    if done.returncode or not threads:
        return f"{WORKERS} sync workers"
    return f"{WORKERS} gthread workers × {threads} threads"


# -------------------------------------------------------------------------- processes


class Server:
    """A gunicorn master started by us; stopped by its own pid only."""

    def __init__(self, name: str, cmd: list[str], port: int, logfile: Path):
        self.name, self.cmd, self.port = name, cmd, port
        self.log = open(logfile, "ab")
        self.log_start = self.log.tell()
        self.started = time.perf_counter()
        self.proc = subprocess.Popen(
            cmd, stdout=subprocess.DEVNULL, stderr=self.log, env=child_env(), start_new_session=True
        )

    def wait_ready(self, path: str, expect: bytes | None, timeout: float) -> float:
        """Seconds from start until `path` answers 200 (containing `expect`)."""
        deadline = self.started + timeout
        while time.perf_counter() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(
                    f"{self.name} exited with {self.proc.returncode}; see {self.log.name}"
                )
            try:
                status, body = loadgen.fetch(self.port, path, timeout=timeout)
                if status == 200 and (expect is None or expect in body):
                    return time.perf_counter() - self.started
            except OSError:
                pass
            time.sleep(0.01)
        raise RuntimeError(f"{self.name} did not answer {path} within {timeout:.0f} s")

    def log_text(self) -> str:
        with open(self.log.name, "rb") as stream:
            stream.seek(self.log_start)
            return stream.read().decode("utf-8", "replace")

    def wait_log(self, needles: tuple[str, ...], timeout: float) -> str | None:
        """The first line of this server's log holding one of `needles`, or None."""
        deadline = time.perf_counter() + timeout
        while time.perf_counter() < deadline:
            for line in self.log_text().splitlines():
                if any(n in line for n in needles):
                    return line
            time.sleep(0.2)
        return None

    def workers(self) -> list[int]:
        return children(self.proc.pid)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()


def children(parent: int) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as stat:
                    fields = stat.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == parent:
                found.append(int(entry))
    return found


def memory_of(pid: int) -> dict:
    """Peak RSS (VmHWM), RSS and PSS of one process, in MB."""
    out = {}
    try:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith(("VmHWM:", "VmRSS:")):
                    out[line.split(":")[0]] = int(line.split()[1]) / 1024
        with open(f"/proc/{pid}/smaps_rollup") as rollup:
            for line in rollup:
                if line.startswith("Pss:"):
                    out["Pss"] = int(line.split()[1]) / 1024
    except OSError:
        pass
    return out


def timed(cmd: list[str], logfile: Path) -> float:
    with open(logfile, "ab") as err:
        started = time.perf_counter()
        subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=err, env=child_env(), check=True)
        return time.perf_counter() - started


# ------------------------------------------------------------------------------ bench


class Bench:
    def __init__(self, items: int, args: argparse.Namespace):
        self.items = items
        self.args = args
        self.prof = profile_for(items, args)
        self.cache = Path(args.cache) if args.cache else gen.default_cache()
        self.root, self.manifest = gen.ensure(items, self.cache, log=log)
        self.work = self.cache / "runs" / str(items)
        self.work.mkdir(parents=True, exist_ok=True)
        self.state = self.work / "state"
        self.py = sys.executable
        self.has_index_cmd = (
            subprocess.run(
                [self.py, "-m", "archive_service.cli", "index", "--help"],
                capture_output=True,
                env=child_env(),
            ).returncode
            == 0
        )
        self.full_paths = [url_request(ibi, FULL_VERBS) for ibi in self.manifest["full"]]
        self.notes: list[str] = []
        self.result: dict = {"items": items}
        self.servers: list[Server] = []

    # -- subject and floor commands -----------------------------------------------------

    def cold_cmd(self, state: Path) -> list[str]:
        if self.has_index_cmd:
            return [
                self.py,
                "-m",
                "archive_service.cli",
                "index",
                "--collection",
                str(self.root),
                "--state-dir",
                str(state),
            ]
        return [
            self.py,
            "-c",
            "import sys; from archive_service.collection import items as index; "
            "index.scan(sys.argv[1])",
            str(self.root),
        ]

    def floor_cmd(self, what: str) -> list[str]:
        return [self.py, str(BENCH / "floors.py"), what, str(self.root)]

    def serve(self) -> Server:
        port = free_port()
        cmd = [
            self.py,
            "-m",
            "archive_service.cli",
            "serve",
            "--collection",
            str(self.root),
            "--archiveaddress",
            f"localhost:{port}",
            "--archiveserviceibi",
            SERVICE_IBI,
            "--state-dir",
            str(self.state),
            "--bind",
            f"127.0.0.1:{port}",
            "--workers",
            str(WORKERS),
            "--resolver",
            "none",
        ]
        server = Server("archive-service serve", cmd, port, self.work / "serve.log")
        self.servers.append(server)
        return server

    def floor_server(self, app: str = "flask") -> Server:
        """The constant Flask app (`flask`) or a bare WSGI callable (`wsgi`)."""
        port = free_port()
        cmd = [
            self.py,
            str(BENCH / "floors.py"),
            "serve",
            "--bind",
            f"127.0.0.1:{port}",
            "--workers",
            str(WORKERS),
            "--app",
            app,
        ]
        server = Server(f"{app} floor server", cmd, port, self.work / "floor.log")
        self.servers.append(server)
        return server

    def stop(self, server: Server) -> None:
        server.stop()
        self.servers.remove(server)

    # -- phases -------------------------------------------------------------------------

    def alternate(self, rounds: int, floor, subject) -> tuple[list, list]:
        """ABBA: floor first in even rounds, subject first in odd ones."""
        floors, subjects = [], []
        for r in range(rounds):
            order = ((floors, floor), (subjects, subject))
            for results, fn in order if r % 2 == 0 else order[::-1]:
                results.append(fn())
        return floors, subjects

    @staticmethod
    def alternate_all(rounds: int, *fns) -> list[list]:
        """ABBA over several: in order in even rounds, in reverse in odd ones."""
        results: list[list] = [[] for _ in fns]
        for r in range(rounds):
            order = list(zip(results, fns))
            for out, fn in order if r % 2 == 0 else order[::-1]:
                out.append(fn())
        return results

    @staticmethod
    def summary(floors: list[float], subjects: list[float]) -> dict:
        ratios = [s / f for f, s in zip(floors, subjects) if f]
        return {
            "floor": floors,
            "subject": subjects,
            "ratios": ratios,
            "floor_median": median(floors),
            "subject_median": median(subjects),
            "ratio": median(ratios),
        }

    def cold(self) -> None:
        label = "archive-service index" if self.has_index_cmd else "index.scan()"
        log(f"cold build ({label}) vs reading every sidecar, {self.prof.runs} rounds")
        if not self.args.single:
            timed(self.floor_cmd("read"), self.work / "floor.log")  # warm the page cache

        def subject() -> float:
            shutil.rmtree(self.state, ignore_errors=True)
            return timed(self.cold_cmd(self.state), self.work / "cold.log")

        floors, subjects = self.alternate(
            self.prof.runs, lambda: timed(self.floor_cmd("read"), self.work / "floor.log"), subject
        )
        self.result["cold"] = {**self.summary(floors, subjects), "command": label}
        log(
            f"  cold: {self.result['cold']['ratio']:.2f}x "
            f"({median(subjects):.2f} s vs {median(floors):.2f} s)"
        )

    def warm(self) -> Server:
        """Warm start rounds; returns the last server started, left running for the HTTP
        phases (so a big collection is loaded once less)."""
        log(f"warm start (serve until it answers) vs bare scandir walk, {self.prof.runs} rounds")
        probe = self.full_paths[0]
        timeout = max(120.0, self.items / 1000)
        # One untimed start: builds the persisted index if serve keeps one, and takes in any
        # change made since the last run (a warm start is 'nothing changed'). --single skips
        # it when the cold build has just left a complete index.
        if not (self.args.single and self.has_index_cmd and "cold" in self.result):
            first = self.serve()
            first.wait_ready(probe, FULL_MARK, timeout)
            self.stop(first)
        kept: list[Server] = []

        def subject() -> float:
            if kept:
                self.stop(kept.pop())
            server = self.serve()
            kept.append(server)
            return server.wait_ready(probe, FULL_MARK, timeout)

        floors, subjects = self.alternate(
            self.prof.runs, lambda: timed(self.floor_cmd("walk"), self.work / "floor.log"), subject
        )
        self.result["warm"] = {
            **self.summary(floors, subjects),
            "persisted_index": self.has_index_cmd,
        }
        if not self.has_index_cmd:
            self.notes.append("no persisted index in this code: warm start is a full scan")
        log(
            f"  warm: {self.result['warm']['ratio']:.2f}x "
            f"({median(subjects):.2f} s vs {median(floors):.2f} s)"
        )
        return kept[0]

    def settle(self, server: Server) -> None:
        """Let a live index's indexer finish setting up its watches before measuring, and
        record how it follows the collection (its log line), if it says."""
        # Setting the watches, then the rescan: minutes each at 1,000,000 items.
        patience = 60 + self.items / 2000
        line = server.wait_log(
            ("watching ", "not watching ", "rescanning"),
            timeout=patience if self.has_index_cmd else 0,
        )
        if not line:
            if self.has_index_cmd:
                self.notes.append(
                    f"{self.items:,} items: the indexer had not set its watches "
                    "when the measures began"
                )
            return
        self.result["follow"] = line.split(": ", 1)[-1].strip()
        log(f"  indexer: {self.result['follow']}")
        if "not watching" in line:
            self.notes.append(f"{self.items:,} items: {self.result['follow']}")
        # Then its walk of the tree for what changed before the watches were set (at
        # 1,000,000 items minutes of disk reads that would share the machine with wrk).
        if not server.wait_log(("consistency rescan at start",), patience):
            self.notes.append(
                f"{self.items:,} items: the indexer's first rescan had not "
                "ended when the measures began"
            )

    def check_paths(self, server: Server) -> list[str]:
        """Keep the requests whose answer really is a full one (a work cut at the end of the
        generated collection may lack its last edition)."""
        good = []
        for path in self.full_paths:
            status, body = loadgen.fetch(server.port, path)
            if status == 200 and FULL_MARK in body:
                good.append(path)
        if len(good) < max(1, len(self.full_paths) // 2):
            raise RuntimeError(
                f"only {len(good)} of {len(self.full_paths)} full requests got a full answer"
            )
        return good

    def http(self, subject: Server) -> None:
        floor = self.floor_server()
        raw = self.floor_server("wsgi")
        floor.wait_ready(self.full_paths[0], None, 60)
        raw.wait_ready(self.full_paths[0], None, 60)
        paths = self.check_paths(subject)
        random.Random(0).shuffle(paths)
        tool = self.args.loadgen
        tool_used = "wrk" if tool == "wrk" or (tool == "auto" and loadgen.WRK) else "python"
        self.result["loadgen"] = tool_used
        log(
            f"urlRequest peak throughput vs constant Flask app and raw WSGI callable "
            f"({tool_used}, {len(paths)} items rotated, {self.prof.rounds} x "
            f"{self.prof.duration:g} s per side)"
        )
        if self.prof.warmup:
            for server in (floor, raw, subject):
                loadgen.peak(server.port, paths, self.prof.warmup, tool=tool)

        def run(server):
            return lambda: loadgen.peak(server.port, paths, self.prof.duration, tool=tool)

        floors, raws, subjects = self.alternate_all(
            self.prof.rounds, run(floor), run(raw), run(subject)
        )
        failed = sum(r["failed"] for r in floors + raws + subjects)
        self.result["throughput"] = {
            **self.summary([r["rate"] for r in floors], [r["rate"] for r in subjects]),
            "failed": failed,
            "rotated": len(paths),
        }
        self.result["throughput_wsgi"] = self.summary(
            [r["rate"] for r in raws], [r["rate"] for r in subjects]
        )
        peak = self.result["throughput"]["subject_median"]
        log(
            f"  throughput: {self.result['throughput']['ratio']:.2f}x of Flask's, "
            f"{self.result['throughput_wsgi']['ratio']:.2f}x of raw WSGI's ({peak:.0f} vs "
            f"{self.result['throughput']['floor_median']:.0f} and "
            f"{self.result['throughput_wsgi']['floor_median']:.0f} req/s)"
        )

        # The same full request over and over: what the protocol itself costs once the
        # items it reads are at hand (any cache the index keeps is warm).
        hot = paths[:1]
        rounds = max(1, (self.prof.rounds + 1) // 2)

        def run_hot(server):
            return lambda: loadgen.peak(server.port, hot, self.prof.duration, tool=tool)

        log(f"the same full urlRequest repeated, {rounds} x {self.prof.duration:g} s per side")
        hot_floors, hot_raws, hot_subjects = self.alternate_all(
            rounds, run_hot(floor), run_hot(raw), run_hot(subject)
        )
        failed += sum(r["failed"] for r in hot_floors + hot_raws + hot_subjects)
        self.result["throughput_hot"] = self.summary(
            [r["rate"] for r in hot_floors], [r["rate"] for r in hot_subjects]
        )
        self.result["throughput_hot_wsgi"] = self.summary(
            [r["rate"] for r in hot_raws], [r["rate"] for r in hot_subjects]
        )
        log(
            f"  hot: {self.result['throughput_hot']['ratio']:.2f}x of Flask's, "
            f"{self.result['throughput_hot_wsgi']['ratio']:.2f}x of raw WSGI's"
        )
        self.stop(raw)
        if failed:
            self.notes.append(f"{failed} failed requests during the throughput runs")

        rate = max(5.0, round(peak * 0.5))
        # Nearly twice the rounds: this VM stalls both sides alike for 10-40 ms every few
        # seconds, and one stall more or less in a round moves that round's p99 several-fold.
        rounds = 2 * self.prof.rounds - 1
        log(
            f"p99 latency at {rate:g} req/s (50% of the urlRequest peak) on both, open loop, "
            f"{rounds} x {self.prof.latency_duration:g} s per side"
        )

        def lat(server):
            return lambda: loadgen.open_loop_process(
                server.port,
                paths,
                rate,
                self.prof.latency_duration,
                warmup=min(0.5, self.prof.warmup or 0.2),
            )

        floors, subjects = self.alternate(rounds, lat(floor), lat(subject))
        self.result["latency"] = {
            **self.summary([r["p99"] for r in floors], [r["p99"] for r in subjects]),
            "rate": rate,
            "floor_p50": median([r["p50"] for r in floors]),
            "subject_p50": median([r["p50"] for r in subjects]),
            "achieved": median([r["achieved"] for r in floors + subjects]),
            "failed": sum(r["failed"] for r in floors + subjects),
        }
        log(
            f"  p99: {self.result['latency']['ratio']:.2f}x "
            f"({self.result['latency']['subject_median'] * 1000:.1f} vs "
            f"{self.result['latency']['floor_median'] * 1000:.1f} ms)"
        )

        self.result["rss"] = {"floor": self.memory(floor), "subject": self.memory(subject)}
        delta = self.result["rss"]["subject"]["peak"] - self.result["rss"]["floor"]["peak"]
        self.result["rss"]["delta"] = delta
        log(
            f"  peak RSS per worker: {self.result['rss']['subject']['peak']:.0f} MB vs "
            f"{self.result['rss']['floor']['peak']:.0f} MB (+{delta:.0f} MB)"
        )
        self.stop(floor)

    def memory(self, server: Server) -> dict:
        pids = server.workers()
        workers = [memory_of(pid) for pid in pids]
        # Processes the workers started (the live index's indexer), reported beside.
        helpers = [memory_of(pid) for w in pids for pid in children(w)]
        return {
            "peak": max((w.get("VmHWM", 0) for w in workers), default=0),
            "pss": max((w.get("Pss", 0) for w in workers), default=0),
            "master_peak": memory_of(server.proc.pid).get("VmHWM", 0),
            "helper_peak": max((h.get("VmHWM", 0) for h in helpers), default=None),
            "workers": len(workers),
        }

    def change(self, server: Server) -> None:
        edits, timeout = self.prof.edits, self.prof.edit_timeout
        if not edits:
            return
        polling = "not watching" in self.result.get("follow", "")
        if polling:
            # Changes show at the next periodic rescan (60 s by default) once it has walked
            # the tree (about a warm start): one or two edits say how long that takes.
            walk = (self.result.get("warm") or {}).get("subject_median") or self.items / 1000
            edits = min(edits, 1 if self.items >= 1_000_000 else 2)
            timeout = max(timeout, min(900.0, 90 + 2 * walk))
        log(f"change-to-answer latency over {edits} sidecar edits")
        editable = self.manifest["editable"]
        originals: dict[Path, bytes] = {}
        latencies: list[float] = []
        first_seen: list[float] = []
        timeouts = consecutive = 0
        base = int(time.time()) % 10_000_000
        try:
            for e in range(edits):
                entry = editable[e % len(editable)]
                sidecar = self.root / entry["directory"] / "item.yaml"
                original = originals.setdefault(sidecar, sidecar.read_bytes())
                stamp = datetime.fromtimestamp(2_000_000_000 + base * 100 + e, UTC)
                new = stamp.strftime("%Y-%m-%dT%H:%M:%SZ")
                text = original.replace(entry["timestamp"].encode(), new.encode())
                path = url_request(entry["directory"])
                if e % 2:  # an editor's atomic save: write aside, rename over
                    aside = sidecar.with_name(".item.yaml.bench")
                    aside.write_bytes(text)
                    os.replace(aside, sidecar)
                else:  # rewritten in place
                    sidecar.write_bytes(text)
                written = time.perf_counter()
                wanted = b"timestamp " + new.encode()
                seen = streak_start = None
                streak = 0
                while time.perf_counter() - written < timeout:
                    status, body = loadgen.fetch(server.port, path)
                    now = time.perf_counter() - written
                    if status == 200 and wanted in body:
                        seen = now if seen is None else seen
                        streak_start = now if streak == 0 else streak_start
                        streak += 1
                        if streak >= 3:  # both workers, most likely: requests spread over them
                            break
                    else:
                        streak = 0
                    time.sleep(0.005 if not polling else 0.2)
                if streak >= 3:
                    latencies.append(streak_start)
                    first_seen.append(seen)
                    consecutive = 0
                else:
                    timeouts += 1
                    consecutive += 1
                    if consecutive >= min(3, edits):
                        log(
                            f"  {consecutive} edits in a row not shown within {timeout:g} s:"
                            " no change propagation; stopping"
                        )
                        break
                time.sleep(random.uniform(0, 0.1))
        finally:
            for sidecar, original in originals.items():
                sidecar.write_bytes(original)
        shown = len(latencies)
        self.result["change"] = {
            "edits": shown + timeouts,
            "shown": shown,
            "timeouts": timeouts,
            "timeout": timeout,
            "polling": polling,
            "p50": loadgen.percentile(latencies, 0.5) if shown else None,
            "p95": loadgen.percentile(latencies, 0.95) if shown else None,
            "p99": loadgen.percentile(latencies, 0.99) if shown else None,
            "max": max(latencies) if shown else None,
            "first_seen_p95": loadgen.percentile(first_seen, 0.95) if shown else None,
        }
        if shown:
            log(
                f"  change: p95 {self.result['change']['p95']:.2f} s, p99 "
                f"{self.result['change']['p99']:.2f} s, {timeouts} timeouts"
            )
        elif not polling:
            self.notes.append("sidecar edits are not propagated to running workers")

    def run(self) -> dict:
        started = time.perf_counter()
        phases = self.args.phases
        self.result.update(
            {
                "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
                "commit": git("rev-parse", "--short", "HEAD"),
                "branch": git("rev-parse", "--abbrev-ref", "HEAD"),
                # The results this script writes do not make the measured code "uncommitted".
                "dirty": bool(
                    git(
                        "status",
                        "--porcelain",
                        "--untracked-files=no",
                        "--",
                        ".",
                        ":!bench/results",
                        ":!bench/RESULTS.md",
                        ":!README.md",
                    )
                ),
                "cpus": os.cpu_count(),
                "python": platform.python_version(),
                "server": worker_model(),
                "smoke": bool(self.args.smoke),
                "runs": self.prof.runs,
                "rounds": self.prof.rounds,
                "manifest": {k: self.manifest[k] for k in ("sidecars", "files")},
            }
        )
        try:
            if "cold" in phases:
                try:
                    self.cold()
                except Exception as exc:  # keep what the other phases measure
                    log(f"cold build failed: {exc!r}")
                    self.notes.append(f"{self.items:,} items: cold build failed: {exc}")
            if phases & {"warm", "http", "change"}:
                if "warm" in phases:
                    server = self.warm()
                else:
                    server = self.serve()
                    server.wait_ready(self.full_paths[0], FULL_MARK, max(120.0, self.items / 1000))
                self.settle(server)
                if "http" in phases:
                    self.http(server)
                if "change" in phases:
                    self.change(server)
                    entries, count = self.manifest["editable"], max(1, self.prof.edits // 4)
                    found = removal(self.root, server.port, entries, url_request, count)
                    self.result["removal"] = found
                    log(f"  removal: {found}")
                self.stop(server)
        finally:
            for server in list(self.servers):
                self.stop(server)
        self.result["notes"] = self.notes
        self.result["seconds"] = round(time.perf_counter() - started)
        return self.result


PHASES = ("cold", "warm", "http", "change")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--items",
        required=True,
        help="collection size(s), comma-separated, e.g. 10000,100000,1000000",
    )
    parser.add_argument(
        "--smoke",
        action="store_true",
        help="one short round of everything: checks the harness, measures nothing",
    )
    parser.add_argument(
        "--cache",
        help="where generated collections and run state are kept "
        "(default: $XDG_CACHE_HOME/archive-service-bench)",
    )
    parser.add_argument(
        "--loadgen",
        choices=("auto", "wrk", "python"),
        default="auto",
        help="peak-throughput load generator (auto: wrk when installed)",
    )
    parser.add_argument(
        "--phases", default=",".join(PHASES), help=f"comma-separated subset of {','.join(PHASES)}"
    )
    parser.add_argument("--runs", type=int, help="cold/warm rounds (default 5; 3 at 1,000,000)")
    parser.add_argument(
        "--single",
        action="store_true",
        help="one cold and one warm round, no untimed warm-up runs: for sizes "
        "where one round takes many minutes (1,000,000 items on a slow disk)",
    )
    parser.add_argument("--rounds", type=int, help="throughput/latency rounds (default 5)")
    parser.add_argument("--duration", type=float, help="seconds per side per throughput round")
    parser.add_argument("--edits", type=int, help="sidecar edits for change-to-answer (200)")
    parser.add_argument(
        "--results-dir",
        default=str(BENCH / "results"),
        help="where each size's JSON results are kept (default bench/results)",
    )
    parser.add_argument(
        "--results",
        default=str(BENCH / "RESULTS.md"),
        help="markdown file whose bench markers get the table",
    )
    parser.add_argument(
        "--readme",
        default=str(ROOT / "README.md"),
        help="also rewrite the markers here when the file has them",
    )
    args = parser.parse_args(argv)
    args.phases = set(args.phases.split(","))
    if not args.phases <= set(PHASES):
        parser.error(f"--phases: choose among {', '.join(PHASES)}")
    sizes = [int(s.replace("_", "")) for s in args.items.split(",")]
    results_dir = Path(args.results_dir)
    results_dir.mkdir(parents=True, exist_ok=True)
    for items in sizes:
        log(f"=== {items:,} items")
        result = Bench(items, args).run()
        name = f"{items}{'-smoke' if args.smoke else ''}.json"
        path = results_dir / name
        result["phase_dates"] = {phase: result["date"] for phase in sorted(args.phases)}
        if path.exists() and set(args.phases) != set(PHASES):
            # A partial run updates only the figures it measured (and says when each was).
            previous = json.loads(path.read_text())
            dates = previous.get("phase_dates") or {ph: previous.get("date") for ph in PHASES}
            previous.update({k: v for k, v in result.items() if v or k not in previous})
            previous["phase_dates"] = {**dates, **result["phase_dates"]}
            result = previous
        path.write_text(json.dumps(result, indent=1, default=str) + "\n")
        log(f"=== {items:,} items done in {result['seconds']} s -> {path}")
    table = report.table(report.load(results_dir, smoke=args.smoke))
    for target in (Path(args.results), Path(args.readme)):
        if report.rewrite(target, table, create=target == Path(args.results)):
            log(f"table written to {target}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
