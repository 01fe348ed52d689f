"""The real `archive-service serve` with 2 gunicorn workers: one indexer process for both, a
changed sidecar answered by both workers within a second, and a restart that answers from the
index it finds while its walk runs."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from urllib.parse import urlencode

import pytest

from archive_service.index.store import Store
from archive_service.testing import wait_until
from serve_process import Serve, children, cmdline, state_of
from support import SERVICE, pairs_of

pytestmark = pytest.mark.process

LATENCY = 1.0
REP = "iconet.com.br/banon/2009/09.09.22.01"


def writes(pid: int) -> int:
    """How many write system calls a process has made (/proc/PID/io): a worker that answers
    a request writes its response (and its access-log line)."""
    with open(f"/proc/{pid}/io", encoding="ascii") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("syscw:"))


class Serving:
    """`archive-service serve` on a loopback port, 2 workers."""

    def __init__(self, collection: Path, tmp_path: Path):
        self.serve = Serve(
            tmp_path,
            "--collection",
            str(collection),
            "--state-dir",
            str(tmp_path / "state"),
            "--archiveaddress",
            "archive.example.org",
            "--archiveserviceibi",
            SERVICE,
            "--resolver",
            "none",
            "--workers",
            "2",
            config=None,
        )
        self.proc, self.log_path = self.serve.process, self.serve.log_path
        self.url = f"http://{self.serve.address}/{SERVICE}?" + urlencode(
            {
                "servicesubject": "urlRequest",
                "clientinformation.ipaddress": "192.0.2.1",
                "parsedibiurl.ibi": REP,
            }
        )

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
        return self.serve.stop(timeout=60)


def test_both_workers_answer_a_changed_sidecar_within_a_second(
    collection: Path, tmp_path: Path
) -> None:
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
            "ibip: LK47B6W/362SFKH\ntarget: reference.bib\n"
        )
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
    assert wait_until(
        lambda: (
            not any(os.path.exists(f"/proc/{p}") and b"--watch" in cmdline(p) for p in indexers)
        ),
        timeout=10,
    )


def test_a_restart_answers_from_the_index_and_leaves_no_zombie(
    collection: Path, tmp_path: Path
) -> None:
    # The complete index a first start leaves.
    subprocess.run(
        [
            sys.executable,
            "-m",
            "archive_service.cli",
            "index",
            "--collection",
            str(collection),
            "--state-dir",
            str(tmp_path / "state"),
        ],
        check=True,
        capture_output=True,
    )
    serving = Serving(collection, tmp_path)
    try:
        serving.wait_answering()
        assert "as it was left" in serving.log_path.read_text()  # it did not wait for the walk
        # The walk that ran meanwhile has ended and been collected: no zombie child.
        pid = serving.proc.pid
        assert wait_until(lambda: not any(state_of(p) == "Z" for p in children(pid)), timeout=10), [
            (p, state_of(p)) for p in children(pid)
        ]
    finally:
        stopped = serving.stop()
    assert stopped == 0
