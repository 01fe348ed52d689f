"""The real `archive-service serve` with 2 gunicorn workers: one indexer process for both, a
changed sidecar answered by both workers within a second, and a restart that answers from the
index it finds while its walk runs."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from urllib.parse import urlencode

from archive_service.index.store import Store
from archive_service.testing import wait_until
from conftest import SERVICE, free_port
from test_store import pairs_of

LATENCY = 1.0
REP = "iconet.com.br/banon/2009/09.09.22.01"


def children(pid: int) -> list[int]:
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/stat", "rb") as f:
                    stat = f.read()
            except OSError:
                continue
            if int(stat.rsplit(b")", 1)[1].split()[1]) == pid:
                found.append(int(name))
    return found


def cmdline(pid: int) -> list[bytes]:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().split(b"\0")
    except OSError:
        return []


def writes(pid: int) -> int:
    """How many write system calls a process has made (/proc/PID/io): a worker that answers
    a request writes its response (and its access-log line)."""
    with open(f"/proc/{pid}/io", encoding="ascii") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("syscw:"))


class Serving:
    """`archive-service serve` on a loopback port, 2 workers, logging into serve.log."""

    def __init__(self, collection: Path, tmp_path: Path):
        port = free_port()
        self.log_path = tmp_path / "serve.log"
        self.log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "archive_service.cli", "serve", "--collection",
             str(collection), "--state-dir", str(tmp_path / "state"), "--archiveaddress",
             "archive.example.org", "--archiveserviceibi", SERVICE, "--resolver", "none",
             "--bind", f"127.0.0.1:{port}", "--workers", "2"],
            stdout=self.log, stderr=subprocess.STDOUT)
        self.url = f"http://127.0.0.1:{port}/{SERVICE}?" + urlencode({
            "servicesubject": "urlRequest", "clientinformation.ipaddress": "192.0.2.1",
            "parsedibiurl.ibi": REP})

    def answer(self, _=None) -> dict[str, str]:
        with urllib.request.urlopen(self.url, timeout=10) as response:
            return pairs_of(response.read().decode("ascii"))

    def wait_answering(self) -> None:
        def answered() -> bool:
            try:
                return "url" in self.answer()
            except OSError:
                return False

        assert wait_until(answered, timeout=60, interval=0.1), self.log_path.read_text()

    def stop(self) -> int:
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(timeout=60)
        self.log.close()
        return self.proc.returncode


def test_both_workers_answer_a_changed_sidecar_within_a_second(collection: Path,
                                                               tmp_path: Path) -> None:
    serving = Serving(collection, tmp_path)
    serve, answer = serving.proc, serving.answer
    indexers: list[int] = []
    try:
        serving.wait_answering()
        st = Store(collection, tmp_path / "state")
        assert wait_until(lambda: "watching" in st.meta().get("indexer", ""), timeout=30)
        # gunicorn spawns its workers up to 0.1 s apart: the first may answer alone.
        assert wait_until(lambda: len(children(serve.pid)) == 2, timeout=10)
        workers = children(serve.pid)
        indexers = [p for w in workers for p in children(w) if b"--watch" in cmdline(p)]
        assert len(indexers) == 1, "one indexer process for all workers"
        assert answer()["url"].endswith("/doc/@relatorio.pdf")

        (collection / REP / "item.yaml").write_text(
            "ibip: LK47B6W/362SFKH\ntarget: reference.bib\n")
        changed = time.monotonic()
        new = lambda pairs: pairs.get("url", "").endswith("/doc/reference.bib")  # noqa: E731
        with ThreadPoolExecutor(8) as pool:
            assert wait_until(lambda: all(map(new, pool.map(answer, range(8)))), timeout=LATENCY)
            seen = time.monotonic() - changed
            # Then a batch that reaches both workers (each one's writes show it answered).
            for _ in range(5):
                before = [writes(w) for w in workers]
                batch = list(pool.map(answer, range(40)))
                served_by = [writes(w) - b for w, b in zip(workers, before)]
                if all(served_by):
                    break
            assert all(served_by), "the batch did not reach both workers"
            assert all(map(new, batch))
        assert seen <= LATENCY
    finally:
        stopped = serving.stop()
    assert stopped == 0
    # The indexer goes with the service.
    assert wait_until(lambda: not any(os.path.exists(f"/proc/{p}") and b"--watch" in cmdline(p)
                                      for p in indexers), timeout=10)


def state_of(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[0].decode()
    except OSError:
        return "gone"


def test_a_restart_answers_from_the_index_and_leaves_no_zombie(collection: Path,
                                                               tmp_path: Path) -> None:
    # The complete index a first start leaves.
    subprocess.run([sys.executable, "-m", "archive_service.cli", "index", "--collection",
                    str(collection), "--state-dir", str(tmp_path / "state")],
                   check=True, capture_output=True)
    serving = Serving(collection, tmp_path)
    try:
        serving.wait_answering()
        assert "as it was left" in serving.log_path.read_text()  # it did not wait for the walk
        # The walk that ran meanwhile has ended and been collected: no zombie child.
        pid = serving.proc.pid
        assert wait_until(lambda: not any(state_of(p) == "Z" for p in children(pid)),
                          timeout=10), [(p, state_of(p)) for p in children(pid)]
    finally:
        stopped = serving.stop()
    assert stopped == 0
