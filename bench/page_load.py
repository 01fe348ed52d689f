"""Do pages starve the protocol? (issue 30, finding 7)

A real `serve` (2 workers, default threads) of a generated collection; urlRequest probes, one
at a time on a kept connection every `--probe-every` seconds, first alone (the floor), then
while `--clients` clients search the item list for a rare word (each search reads its whole
window: tens of milliseconds) as fast as they are answered. Reports the probes' p50/p95/max
in both phases, their ratio, what the searches got (200, 503) and the load average.

    python3 bench/page_load.py --items 100000 --cache /tmp/page-load
    python3 bench/page_load.py --items 100000 --cache /tmp/page-load --checkout /tmp/main

`--checkout DIR` measures another version's code (e.g. `git archive main | tar -x -C DIR`);
the collection and its index (in `--cache`) are shared by both runs. Searching clients honour
Retry-After, as a browser's user does, unless `--impatient` (then they ask again at once).
The searching clients run in a process of their own, so that the probes' timings are not
the clients' GIL.
"""

from __future__ import annotations

import argparse
import http.client
import json
import multiprocessing
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from urllib.parse import quote, urlencode

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
SERVICE_IBI = "sid.inpe.br/mtc-m18@80/2008/03.17.15.17"
RARE = "zqxjv"  # in no IBI, title or date: every search reads its whole window


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


def collection(items: int, cache: Path) -> Path:
    root = cache / f"collection-{items}"
    if not (root / ".complete").exists():
        sys.path.insert(0, str(ROOT))
        from archive_service.testing import make_collection

        print(f"generating {items} items in {root} …", flush=True)
        make_collection(root, items)
        (root / ".complete").write_text("")
    return root


def start_serve(code: Path, root: Path, state: Path, port: int, extra: list[str], log: Path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("ARCHIVE_SERVICE_")}
    env["PYTHONPATH"] = str(code)
    cmd = [sys.executable, "-m", "archive_service.cli", "serve", "--collection", str(root)]
    cmd += ["--state-dir", str(state), "--bind", f"127.0.0.1:{port}", "--workers", "2"]
    cmd += ["--archiveaddress", f"localhost:{port}", "--archiveserviceibi", SERVICE_IBI]
    cmd += ["--resolver", "none", *extra]
    # `-m` puts the working directory first on sys.path: run from the log's, not a checkout.
    return subprocess.Popen(
        cmd,
        env=env,
        cwd=log.parent,
        stdout=subprocess.DEVNULL,
        stderr=open(log, "ab"),
        start_new_session=True,
    )


def get(connection: http.client.HTTPConnection, path: str) -> tuple[int, bytes, dict]:
    connection.request("GET", path)
    response = connection.getresponse()
    return response.status, response.read(), dict(response.getheaders())


def wait_answering(port: int, server: subprocess.Popen, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    path = f"/{SERVICE_IBI}?servicesubject=inclusionConfirmationRequest"
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise SystemExit(f"serve exited with {server.returncode}")
        try:
            if get(http.client.HTTPConnection("127.0.0.1", port, timeout=5), path)[0] == 200:
                return
        except OSError:
            pass
        time.sleep(0.2)
    raise SystemExit(f"serve did not answer within {timeout:.0f} s")


def wait_searchable(port: int, timeout: float) -> None:
    """Until the item list answers (503 while the index is still being completed)."""
    deadline = time.monotonic() + timeout
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    while time.monotonic() < deadline:
        if get(connection, f"/{SERVICE_IBI}/items?q={RARE}")[0] == 200:
            return
        time.sleep(1)
    raise SystemExit(f"the item list did not answer within {timeout:.0f} s")


def probe_path(ibi: str) -> str:
    query = {
        "servicesubject": "urlRequest",
        "clientinformation.ipaddress": "150.163.2.174",
        "parsedibiurl.ibi": ibi,
    }
    return f"/{SERVICE_IBI}?" + urlencode(query, quote_via=quote)


def probes(port: int, path: str, seconds: float, every: float) -> list[float]:
    """urlRequest latencies (ms) over `seconds`, one every `every` s on a kept connection."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    took: list[float] = []
    end = time.monotonic() + seconds
    while (start := time.monotonic()) < end:
        status, body, _ = get(connection, path)
        took.append((time.monotonic() - start) * 1000)
        assert status == 200 and b"\nurl " in b"\n" + body, (status, body[:200])
        time.sleep(max(0.0, every - (time.monotonic() - start)))
    return took


def search_clients(port: int, clients: int, seconds: float, impatient: bool, out) -> None:
    """In a process of its own: `clients` threads searching until `seconds` pass."""
    counts: dict[str, int] = {}
    lock = threading.Lock()
    path = f"/{SERVICE_IBI}/items?q={RARE}"
    end = time.monotonic() + seconds

    def client() -> None:
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        while time.monotonic() < end:
            try:
                status, body, headers = get(connection, path)
                if status != 200:
                    counts.setdefault(f"first {status}", body[:120].decode(errors="replace"))
            except OSError:
                status, headers = 0, {}
                connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
            with lock:
                counts[str(status)] = counts.get(str(status), 0) + 1
            if status == 503 and not impatient:
                time.sleep(float(headers.get("Retry-After", "1")))

    threads = [threading.Thread(target=client) for _ in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    out.put(counts)


def summary(took: list[float]) -> dict:
    return {
        "probes": len(took),
        "p50_ms": round(percentile(took, 0.5), 2),
        "p95_ms": round(percentile(took, 0.95), 2),
        "max_ms": round(max(took), 1),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=100_000)
    parser.add_argument("--cache", type=Path, default=Path("/tmp/archive-service-page-load"))
    parser.add_argument("--checkout", type=Path, default=ROOT, help="code to measure")
    parser.add_argument("--clients", type=int, default=64)
    parser.add_argument("--seconds", type=float, default=20)
    parser.add_argument("--probe-every", type=float, default=0.02)
    parser.add_argument("--impatient", action="store_true", help="ignore Retry-After")
    parser.add_argument("--serve-arg", action="append", default=[], help="e.g. --threads=8")
    args = parser.parse_args(argv)

    root = collection(args.items, args.cache)
    port = free_port()
    server = start_serve(
        args.checkout.resolve(),
        root,
        args.cache / "state",
        port,
        args.serve_arg,
        args.cache / "serve.log",
    )
    try:
        wait_answering(port, server, timeout=3600)
        wait_searchable(port, timeout=1200)
        sys.path.insert(0, str(ROOT))
        from archive_service.testing import rep_name

        path = probe_path(rep_name(1))
        probes(port, path, 2, args.probe_every)  # warm both workers' caches
        before = os.getloadavg()
        floor = probes(port, path, args.seconds, args.probe_every)
        out: multiprocessing.Queue = multiprocessing.Queue()
        load = multiprocessing.Process(
            target=search_clients,
            args=(port, args.clients, args.seconds + 4, args.impatient, out),
        )
        load.start()
        time.sleep(2)  # every client asking
        loaded = probes(port, path, args.seconds, args.probe_every)
        searches = out.get()
        load.join()
        result = {
            "code": str(args.checkout),
            "items": args.items,
            "clients": args.clients,
            "impatient": args.impatient,
            "serve_args": args.serve_arg,
            "floor": summary(floor),
            "searching": summary(loaded),
            "p95_ratio": round(percentile(loaded, 0.95) / percentile(floor, 0.95), 1),
            "searches": searches,
            "searches_200_per_s": round(searches.get("200", 0) / (args.seconds + 4), 1),
            "loadavg_before": before,
            "loadavg_after": os.getloadavg(),
        }
        print(json.dumps(result, indent=1))
    finally:
        server.send_signal(signal.SIGTERM)
        try:
            server.wait(30)
        except subprocess.TimeoutExpired:
            server.kill()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
