"""Load generators: peak throughput (wrk when installed, else Python processes) and an
open-loop constant-rate generator for latency (Python, a bare selector loop).

Every request opens its own connection: gunicorn's sync workers close the connection after
each response, so keep-alive would not change anything.

The open-loop generator schedules request i at t0 + i/rate whatever happened before, and
measures each latency from that scheduled time, so a stall delays later requests' send times
and shows in their latency instead of silently lowering the offered rate (no coordinated
omission).

    python bench/loadgen.py open --port P --paths FILE --rate R --duration S
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import re
import selectors
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

WRK = shutil.which("wrk")

_LUA = """
local paths = {}
for line in io.lines(%s) do paths[#paths + 1] = line end
local i = 0
request = function()
  i = i %% #paths + 1
  return wrk.format("GET", paths[i])
end
"""


def request_bytes(path: str, port: int) -> bytes:
    return f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n".encode()


def fetch(port: int, path: str, timeout: float = 10.0) -> tuple[int, bytes]:
    """One request: (status, body). Raises OSError when nothing answers."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        sock.sendall(request_bytes(path, port))
        chunks = []
        while True:
            data = sock.recv(65536)
            if not data:
                break
            chunks.append(data)
    raw = b"".join(chunks)
    head, _, body = raw.partition(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1]) if head.startswith(b"HTTP/") else 0
    return status, body


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * len(ordered) + 0.5) - 1))]


# ------------------------------------------------------------------- peak throughput


def wrk_peak(port: int, paths: list[str], duration: float, connections: int) -> dict:
    with tempfile.TemporaryDirectory(prefix="bench-wrk-") as tmp:
        listing = Path(tmp) / "paths.txt"
        listing.write_text("\n".join(paths) + "\n")
        script = Path(tmp) / "rotate.lua"
        script.write_text(_LUA % json.dumps(str(listing)))
        out = subprocess.run(
            [
                WRK,
                "-t1",
                f"-c{connections}",
                f"-d{max(1, round(duration))}s",
                "--timeout",
                "10s",
                "-s",
                str(script),
                f"http://127.0.0.1:{port}",
            ],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    rate = float(re.search(r"Requests/sec:\s+([0-9.]+)", out).group(1))
    total = int(re.search(r"([0-9]+) requests in", out).group(1))
    bad = re.search(r"Non-2xx or 3xx responses: ([0-9]+)", out)
    errors = re.search(
        r"Socket errors: connect ([0-9]+), read ([0-9]+), write ([0-9]+), "
        r"timeout ([0-9]+)",
        out,
    )
    failed = int(bad.group(1)) if bad else 0
    # gunicorn's sync workers close after every answer; wrk may count a few of those closes as
    # read errors. Timeouts and refused connections are real failures.
    if errors:
        failed += int(errors.group(1)) + int(errors.group(4))
    return {"rate": rate, "requests": total, "failed": failed, "tool": "wrk"}


def _closed_worker(args) -> tuple[int, int]:
    port, paths, offset, deadline = args
    done = failed = 0
    i = offset
    while time.monotonic() < deadline:
        path = paths[i % len(paths)]
        i += 1
        try:
            status, _ = fetch(port, path)
            if status != 200:
                failed += 1
        except OSError:
            failed += 1
        done += 1
    return done, failed


def python_peak(port: int, paths: list[str], duration: float, connections: int) -> dict:
    """Closed loop over `connections` processes; slower than wrk, so on a small machine it
    shares the CPU with the server and compresses every ratio toward 1."""
    ctx = multiprocessing.get_context("fork")
    with ctx.Pool(connections) as pool:
        started = time.monotonic()
        deadline = started + duration
        results = pool.map(
            _closed_worker, [(port, paths, k * 7919, deadline) for k in range(connections)]
        )
        elapsed = time.monotonic() - started
    done = sum(d for d, _ in results)
    return {
        "rate": done / elapsed,
        "requests": done,
        "failed": sum(f for _, f in results),
        "tool": "python",
    }


def peak(
    port: int, paths: list[str], duration: float, connections: int = 4, tool: str = "auto"
) -> dict:
    if tool == "wrk" or (tool == "auto" and WRK):
        if not WRK:
            raise RuntimeError("wrk is not installed (apt-get install wrk)")
        return wrk_peak(port, paths, duration, connections)
    return python_peak(port, paths, duration, connections)


# ---------------------------------------------------------------- open-loop latency


def open_loop(
    port: int, paths: list[str], rate: float, duration: float, warmup: float = 0.5
) -> dict:
    """Send request i at start + i/rate on its own non-blocking connection; a bare selector
    loop (asyncio streams cost several times more CPU per request, which on a two-core
    machine is taken from the server being measured)."""
    requests = [request_bytes(p, port) for p in paths]
    address = ("127.0.0.1", port)
    selector = selectors.DefaultSelector()
    clock = time.perf_counter
    total = int((duration + warmup) * rate)
    start = clock() + 0.05
    latencies: list[float] = []
    failed = sent = 0
    pending = 0
    last_send = start

    def finish(sock, state, ok: bool) -> None:
        nonlocal failed, pending
        selector.unregister(sock)
        sock.close()
        pending -= 1
        if state[0] - start >= warmup:
            latencies.append(clock() - state[0])
            failed += not ok

    while sent < total or pending:
        now = clock()
        while sent < total and start + sent / rate <= now:
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.setblocking(False)
            sock.connect_ex(address)
            # state: scheduled time, request, received head, phase (0 connecting, 1 reading)
            selector.register(
                sock,
                selectors.EVENT_WRITE,
                [start + sent / rate, requests[sent % len(requests)], b"", 0],
            )
            sent += 1
            pending += 1
            last_send = now
        wait = max(0.0, start + sent / rate - clock()) if sent < total else 0.1
        for key, _ in selector.select(min(wait, 0.1)):
            sock, state = key.fileobj, key.data
            try:
                if state[3] == 0:
                    sock.send(state[1])  # a request is far smaller than the socket buffer
                    state[3] = 1
                    selector.modify(sock, selectors.EVENT_READ, state)
                    continue
                data = sock.recv(65536)
            except OSError:
                finish(sock, state, False)
                continue
            if data:
                if len(state[2]) < 16:
                    state[2] += data[:16]
            else:
                finish(sock, state, state[2].startswith((b"HTTP/1.1 200", b"HTTP/1.0 200")))
    return {
        "rate": rate,
        "achieved": total / max(1e-9, last_send - start + 1 / rate),
        "samples": len(latencies),
        "failed": failed,
        "p50": percentile(latencies, 0.50),
        "p90": percentile(latencies, 0.90),
        "p99": percentile(latencies, 0.99),
        "max": max(latencies, default=float("nan")),
    }


def open_loop_process(
    port: int, paths: list[str], rate: float, duration: float, warmup: float = 0.5
) -> dict:
    """The open-loop generator in its own process, apart from the orchestrator."""
    with tempfile.NamedTemporaryFile("w", suffix=".txt", prefix="bench-paths-") as listing:
        listing.write("\n".join(paths) + "\n")
        listing.flush()
        out = subprocess.run(
            [
                sys.executable,
                __file__,
                "open",
                "--port",
                str(port),
                "--paths",
                listing.name,
                "--rate",
                str(rate),
                "--duration",
                str(duration),
                "--warmup",
                str(warmup),
            ],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    return json.loads(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="open-loop latency generator")
    sub = parser.add_subparsers(dest="command", required=True)
    op = sub.add_parser("open")
    op.add_argument("--port", type=int, required=True)
    op.add_argument("--paths", type=Path, required=True)
    op.add_argument("--rate", type=float, required=True)
    op.add_argument("--duration", type=float, required=True)
    op.add_argument("--warmup", type=float, default=0.5)
    args = parser.parse_args(argv)
    paths = [p for p in args.paths.read_text().splitlines() if p]
    print(json.dumps(open_loop(args.port, paths, args.rate, args.duration, args.warmup)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
