"""The workers' CPU time a urlRequest costs (issue 35: urlRequest ≥ 0.9× a raw WSGI callable
under the same gunicorn), which a shared machine's load moves far less than throughput.

    python bench/urlrequest_cpu.py [--items 2000] [--rounds 3] [--pairs 4] [--duration 3]
                                   [--code DIR ...] [--cache DIR] [--stubs MODE ...]

For each checkout in `--code` (default: this one; e.g. `git archive main | tar -x -C DIR` for
main's), `archive-service serve` over the generated collection (bench/gen.py) and the raw WSGI
floor (`floors.py serve --app wsgi`: the same ArchiveServer, a constant callable), all up at
once; then a second floor, `--app sized`, the same constant callable answering with a body of
serve's median answer length and serve's header fields (what is left between it and serve is
the app's own work, not the bytes sent: issue 35's target is read against it, the 40-byte
floor's figure printed beside it). Each round runs `--pairs` bursts of wrk (else the Python
load generator) against every server in turn, the order reversed every other time, on the full
urlRequest of the rotated items bench/run.py uses (`GetLastEdition GetTranslation
GetMetadata(oai_dc)`), and reads the user and system CPU time of each server's workers
(/proc/<pid>/stat, every thread) before and after: µs a request, and per round the median of
floor ÷ serve over its bursts (the throughput that CPU allows against the floor's). Prints the
load average of each round: the machine is shared. `--stubs constant urlkey catalog` adds
serves of the first checkout whose answer is cut down to a piece (bench/serve_stub.py): what
the rest costs in the server is serve's CPU a request less theirs.
"""

from __future__ import annotations

import argparse
import http.client
import os
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

import gen  # noqa: E402
import loadgen  # noqa: E402
import run  # noqa: E402


def env_for(code: Path) -> dict:
    env = run.child_env()
    env["PYTHONPATH"] = str(code)  # that checkout's package, nothing else of ours
    return env


def start(cmd: list[str], code: Path, logfile: Path) -> subprocess.Popen:
    with open(logfile, "ab") as log:
        return subprocess.Popen(
            cmd,
            stdout=subprocess.DEVNULL,
            stderr=log,
            env=env_for(code),
            start_new_session=True,
            cwd=code,
        )


def answering(proc: subprocess.Popen, port: int, path: str, logfile: Path) -> None:
    deadline = time.monotonic() + 120
    while True:
        try:
            if loadgen.fetch(port, path)[0] == 200:
                return
        except OSError:
            pass
        if time.monotonic() > deadline or proc.poll() is not None:
            raise RuntimeError(f"no answer on port {port}; see {logfile}")
        time.sleep(0.05)


def servers(code: Path, root: Path, tmp: Path, paths: list[str], stubs: tuple[str, ...] = ()):
    """{"floor": (process, port), "serve": …, "floor-sized": …, stub: …} for one checkout,
    answering; "floor-sized" the floor answering with serve's body length and header fields;
    each of `stubs` a serve whose answer is cut down (bench/serve_stub.py)."""
    path = paths[0]
    tag = code.name
    up = {}
    port = run.free_port()
    cmd = [sys.executable, str(BENCH / "floors.py"), "serve", "--bind", f"127.0.0.1:{port}"]
    cmd += ["--workers", str(run.WORKERS), "--app", "wsgi"]
    up["floor"] = (start(cmd, code, tmp / f"floor-{tag}.log"), port)
    port = run.free_port()
    for what in ("serve", *stubs):
        port = run.free_port()
        cmd = [sys.executable, "-m", "archive_service.cli", "serve"]
        if what != "serve":
            cmd = [sys.executable, str(BENCH / "serve_stub.py"), what]
        cmd += ["--collection", str(root), "--state-dir", str(tmp / f"state-{tag}-{what}")]
        cmd += ["--no-announce", "--resolver", "none", "--workers", str(run.WORKERS)]
        cmd += ["--bind", f"127.0.0.1:{port}", "--archiveaddress", f"localhost:{port}"]
        cmd += ["--archiveserviceibi", run.SERVICE_IBI]
        up[what] = (start(cmd, code, tmp / f"{what}-{tag}.log"), port)
    for what, (proc, port) in up.items():
        answering(proc, port, path, tmp / f"{what}-{tag}.log")
    for what in ("serve", *stubs):
        watching(tmp / f"{what}-{tag}.log")
    length, names = answer_shape(up["serve"][1], paths)
    port = run.free_port()
    cmd = [sys.executable, str(BENCH / "floors.py"), "serve", "--bind", f"127.0.0.1:{port}"]
    cmd += ["--workers", str(run.WORKERS), "--app", "sized", "--body-bytes", str(length)]
    cmd += ["--header-names", ",".join(names)]
    up["floor-sized"] = (start(cmd, code, tmp / f"floor-sized-{tag}.log"), port)
    answering(*up["floor-sized"], path, tmp / f"floor-sized-{tag}.log")
    print(f"{tag}: serve's answers {length} bytes (median), header fields {names}", flush=True)
    return up


# What gunicorn adds to every response, the floor's as serve's.
SERVER_FIELDS = frozenset(("server", "date", "connection", "keep-alive"))


def answer_shape(port: int, paths: list[str]) -> tuple[int, list[str]]:
    """The median body length of serve's answers to `paths` and the header fields its app
    sends (not gunicorn's own): what the sized floor answers with."""
    lengths, names = [], []
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        for path in paths:
            conn.request("GET", path)
            response = conn.getresponse()
            lengths.append(len(response.read()))
            names = [n for n, _ in response.getheaders() if n.lower() not in SERVER_FIELDS]
    finally:
        conn.close()
    return int(statistics.median(lengths)), names


def watching(logfile: Path, timeout: float = 60) -> None:
    """Wait for the indexer's word on how it follows the collection (kept answers are
    trusted only while it watches with inotify: indexer/vouch.py)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        text = logfile.read_text(errors="replace")
        if "watching " in text or "rescanning" in text:
            return
        time.sleep(0.2)
    print(f"note: the indexer said nothing of its watches in {logfile}", flush=True)


def cpu_split(pids: list[int]) -> tuple[float, float]:
    """User and system CPU seconds of `pids` so far (every thread's)."""
    user = system = 0
    for pid in pids:
        with open(f"/proc/{pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
        user, system = user + int(fields[11]), system + int(fields[12])
    tick = os.sysconf("SC_CLK_TCK")
    return user / tick, system / tick


def burst(proc: subprocess.Popen, port: int, paths: list[str], duration: float, tool: str):
    """(requests a second, workers' user and system CPU µs a request) of one burst."""
    workers = run.children(proc.pid)
    before = cpu_split(workers)
    got = loadgen.peak(port, paths, duration, tool=tool)
    if got["failed"]:
        raise RuntimeError(f"{got['failed']} requests failed on port {port}")
    after = cpu_split(workers)
    user, system = ((b - a) / got["requests"] * 1e6 for a, b in zip(before, after, strict=True))
    return got["rate"], user, system


def report_stub(round_: int, load: str, stub: str, stubs: list, serves: list) -> None:
    """One round of a stub against serve: the CPU a request the rest of the answer costs."""
    med = statistics.median
    extra = [(s[1] + s[2]) - (b[1] + b[2]) for b, s in zip(stubs, serves, strict=True)]
    cpu = med(b[1] + b[2] for b in stubs)
    print(
        f"round {round_ + 1} (load {load}) stub {stub}: CPU a request {cpu:.0f} µs; serve "
        f"costs {med(extra):+.0f} µs more (median of the pairs)",
        flush=True,
    )


def report(round_: int, load: str, code: Path, floors: list, serves: list, kind: str = "") -> None:
    """One round of one checkout: medians of its bursts, and of the pairs' ratios; `kind`
    "sized " for the floor answering with serve's body length and header fields."""
    med = statistics.median
    cpu = [(f[1] + f[2]) / (s[1] + s[2]) for f, s in zip(floors, serves, strict=True)]
    rate = [s[0] / f[0] for f, s in zip(floors, serves, strict=True)]
    side = {}
    for name, bursts in (("floor", floors), ("serve", serves)):
        total, user = med(b[1] + b[2] for b in bursts), med(b[1] for b in bursts)
        system, rate_ = med(b[2] for b in bursts), med(b[0] for b in bursts)
        side[name] = f"{total:.0f} µs ({user:.0f} user + {system:.0f} sys), {rate_:.0f} req/s"
    print(
        f"round {round_ + 1} (load {load}) {code.name}: CPU a request {kind}floor "
        f"{side['floor']}; serve {side['serve']}; {kind}floor/serve CPU {med(cpu):.3f}x, "
        f"req/s {med(rate):.3f}x",
        flush=True,
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--pairs", type=int, default=4, help="bursts of each server a round")
    parser.add_argument("--duration", type=float, default=3, help="seconds a burst")
    parser.add_argument("--code", type=Path, nargs="*", default=[run.ROOT])
    parser.add_argument("--cache", type=Path, default=None)
    parser.add_argument("--loadgen", choices=("auto", "wrk", "python"), default="auto")
    parser.add_argument(
        "--stubs",
        nargs="*",
        default=[],
        choices=("constant", "urlkey", "catalog"),
        help="serves of the first checkout whose answer is cut down (bench/serve_stub.py)",
    )
    args = parser.parse_args()
    root, manifest = gen.ensure(args.items, args.cache, log=run.log)
    paths = [run.url_request(ibi, run.FULL_VERBS) for ibi in manifest["full"]]
    random.Random(0).shuffle(paths)
    codes = [code.resolve() for code in args.code]
    with tempfile.TemporaryDirectory(prefix="bench-urlcpu-") as name:
        tmp = Path(name)
        stubs = tuple(args.stubs)
        up = {
            code: servers(code, root, tmp, paths, stubs if code == codes[0] else ())
            for code in codes
        }
        sides = [(code, what) for code in codes for what in up[code]]
        try:
            for servers_of in up.values():
                for _proc, port in servers_of.values():
                    loadgen.peak(port, paths, 2, tool=args.loadgen)  # warm-up: a first lap
            for round_ in range(args.rounds):
                load = " ".join(Path("/proc/loadavg").read_text().split()[:3])
                got = {key: [] for key in sides}
                for pair in range(args.pairs):
                    for code, what in sides if pair % 2 == 0 else sides[::-1]:
                        got[code, what].append(
                            burst(*up[code][what], paths, args.duration, args.loadgen)
                        )
                for code in codes:
                    report(round_, load, code, got[code, "floor"], got[code, "serve"])
                    sized = got[code, "floor-sized"]
                    report(round_, load, code, sized, got[code, "serve"], "sized ")
                for stub in stubs:
                    report_stub(round_, load, stub, got[codes[0], stub], got[codes[0], "serve"])
        finally:
            for servers_of in up.values():
                for proc, _ in servers_of.values():
                    proc.send_signal(signal.SIGTERM)
                    proc.wait(60)
    return 0


if __name__ == "__main__":
    sys.exit(main())
