"""Stopping `serve` while its workers boot: every process of it is gone within seconds (no
worker left for the master to SIGKILL after gunicorn's 30 s graceful timeout, no indexer
left running), and a Ctrl-C prints no traceback."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from serve_process import Serve, cmdline, state_of, wait_until

pytestmark = pytest.mark.process


def running_with(marker: str) -> list[int]:
    """Processes whose command line names `marker` (the test's own state directory)."""
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit() and any(marker.encode() in part for part in cmdline(int(name))):
            found.append(int(name))
    return found


def kill_all(pids: list[int]) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def left_after(marker: str, grace: float = 5) -> list[int]:
    """The processes naming `marker` still running `grace` seconds on (an indexer told to stop
    by the end of its worker may be finishing its start-up; a busy machine slows it)."""
    end = time.monotonic() + grace
    while (left := running_with(marker)) and time.monotonic() < end:
        time.sleep(0.05)
    return left


ROUNDS = 4


def stop_while_booting(
    tmp_path: Path, round: int, booted: int, sig: int, group: bool = False
) -> tuple[str, float | None, list[int]]:
    """Start serve with two workers and send `sig` once `booted` workers said they boot:
    (its log, how long it took to exit or None, the processes of it still running)."""
    state = tmp_path / f"state-{round}"
    serve = Serve(
        tmp_path, "--state-dir", str(state), "--workers", "2", "--no-announce", own_group=group
    )
    took = None
    try:
        # Closely, to hit the worker's or the indexer's start-up.
        wait_until(
            lambda: serve.log().count("Booting worker") >= booted or serve.process.poll(),
            30,
            f"{booted} worker(s) to boot",
            every=0.001,
        )
        start = time.monotonic()
        if group:
            os.killpg(serve.process.pid, sig)
        else:
            serve.signal(sig)
        try:
            serve.process.wait(10)
            took = time.monotonic() - start
        except subprocess.TimeoutExpired:
            pass
        left = left_after(str(state))
    finally:
        serve.kill()
        kill_all(running_with(str(state)))
    return serve.log(), took, left


def caught_signals(pid: int) -> int:
    with open(f"/proc/{pid}/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("SigCgt:"):
                return int(line.split()[1], 16)
    return 0


def catch_a_booting_worker(serve: Serve) -> int | None:
    """A worker of `serve` stopped (SIGSTOP) before it set its own signal handlers, while it
    still has the master's (the master catches SIGHUP; a worker resets it first, before
    its SIGTERM, SIGINT and SIGQUIT), or None
    if both workers were past that point when caught."""
    master, seen = serve.process.pid, set()
    while len(seen) < 2 and serve.process.poll() is None:
        try:
            with open(f"/proc/{master}/task/{master}/children", encoding="ascii") as f:
                new = [int(pid) for pid in f.read().split() if int(pid) not in seen]
        except OSError:
            return None
        for pid in new:
            os.kill(pid, signal.SIGSTOP)
            seen.add(pid)
            wait_until(lambda pid=pid: state_of(pid) in ("T", "gone"), 5, f"{pid} to stop")
            if state_of(pid) == "T" and caught_signals(pid) & 1 << (signal.SIGHUP - 1):
                return pid
            os.kill(pid, signal.SIGCONT)
    return None


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["TERM", "INT"])
def test_a_worker_signalled_as_it_boots_stops(tmp_path, sig):
    """The window made wide: a worker is held between its fork and its signal handlers while
    the master is told to stop and tells it to stop (it once lost that signal, ran on, started
    an indexer, and the master SIGKILLed it after 30 s)."""
    for round in range(20):
        state = tmp_path / f"state-{round}"
        serve = Serve(tmp_path, "--state-dir", str(state), "--workers", "2", "--no-announce")
        try:
            worker = catch_a_booting_worker(serve)
            if worker is None:
                continue  # too late for both: try again
            serve.signal(sig)
            serve.wait_log(f"Handling signal: {sig.name[3:].lower()}")
            time.sleep(0.5)  # the master signals its workers (the held one's waits, pending)
            said = len(serve.log())
            os.kill(worker, signal.SIGCONT)
            try:
                serve.process.wait(10)
            except subprocess.TimeoutExpired:
                pass
            left = left_after(str(state))
            log = serve.log()
            assert serve.process.returncode is not None, log
            assert "was sent SIGKILL" not in log and not left, (left, log)
            assert ": started the indexer" not in log[said:], log  # by a worker told to stop
            return
        finally:
            serve.kill()
            kill_all(running_with(str(state)))
    pytest.fail("no worker was caught before it set its signal handlers in 20 starts")


@pytest.mark.parametrize("booted", [1, 2])
def test_ctrl_c_while_serve_starts_prints_no_traceback(tmp_path, booted):
    for round in range(ROUNDS):
        log, took, left = stop_while_booting(tmp_path, round, booted, signal.SIGINT, group=True)
        assert took is not None and took < 10 and not left, (took, left, log)
        assert "Traceback" not in log, log


def test_a_worker_told_to_quit_again_as_it_exits_prints_no_traceback(tmp_path):
    """Ctrl-C reaches a worker twice: from the terminal (the process group) and from the master
    (SIGQUIT). A second quit landing while the first one's exit runs the interpreter's atexit
    hooks raised SystemExit inside them: "Exception ignored … Traceback" in the log (seen in
    1 of ~5 Ctrl-Cs while workers boot). Here the second, third … come every few ms."""
    for round in range(5):
        state = tmp_path / f"state-{round}"
        serve = Serve(tmp_path, "--state-dir", str(state), "--workers", "1", "--no-announce")
        try:
            serve.wait_answering()
            (worker,) = serve.workers()
            os.kill(worker, signal.SIGQUIT)
            end = time.monotonic() + 3
            while state_of(worker) not in ("Z", "gone") and time.monotonic() < end:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(worker, signal.SIGINT)
                time.sleep(0.002)
            wait_until(lambda s=serve: s.log().count("Booting worker") >= 2, 30, "a new worker")
            assert "Traceback" not in serve.log(), serve.log()
        finally:
            serve.kill()
            kill_all(running_with(str(state)))
