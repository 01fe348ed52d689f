"""Adversarial checks of `serve`'s life: reloads (SIGHUP) with settings that cannot take
effect, and the processes left when the master dies. Real processes (tests/serve_process.py)."""

from __future__ import annotations

import signal
import socket
import time

import pytest

from serve_process import (
    SAMPLE,
    SERVICE,
    Process,
    Serve,
    children,
    free_port,
    http_get,
    state_of,
    wait_until,
)


def _config(path, bind: str, state) -> None:
    path.write_text(
        f"collection: {SAMPLE}\narchiveserviceibi: {SERVICE}\nresolver: none\n"
        f"archiveaddress: {bind}\nbind: {bind}\nstate_dir: {state}\nworkers: 1\n"
    )


def _confirmed(bind: str) -> bool:
    url = f"http://{bind}/{SERVICE}?servicesubject=inclusionConfirmationRequest"
    try:
        return http_get(url, timeout=2)[2] == b"confirmation yes"
    except OSError:
        return False


@pytest.mark.process
@pytest.mark.slow
def test_a_reload_to_a_bind_already_taken_keeps_serving_the_old_one(tmp_path):
    """gunicorn closes its listeners before it opens the new bind and, when that fails
    (five tries a second apart), the master exits: a SIGHUP naming a busy port took the
    Archive down."""
    config, state = tmp_path / "archive-service.yaml", tmp_path / "state"
    old = f"127.0.0.1:{free_port()}"
    _config(config, old, state)
    serve = Process(["serve", "--config", str(config)], tmp_path / "serve.log").start()
    try:
        wait_until(lambda: serve.check_running() or _confirmed(old), 30, "serve to answer")
        with socket.socket() as taken:
            taken.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            taken.bind(("127.0.0.1", 0))
            taken.listen()
            busy = f"127.0.0.1:{taken.getsockname()[1]}"
            _config(config, busy, state)
            serve.proc.send_signal(signal.SIGHUP)
            serve.wait_log("reload: still serving the previous settings", timeout=15)
            time.sleep(1)
            serve.check_running()
            assert _confirmed(old), serve.text()
        log = serve.text()
        assert busy in log.split("reload: still serving the previous settings", 1)[1]
        new = f"127.0.0.1:{free_port()}"  # a free one is taken as before
        _config(config, new, state)
        serve.proc.send_signal(signal.SIGHUP)
        wait_until(lambda: serve.check_running() or _confirmed(new), 20, "the new bind")
        assert serve.stop() == 0
    finally:
        serve.kill()


def _descendants(pid: int) -> set[int]:
    found, todo = set(), [pid]
    while todo:
        for child in children(todo.pop()):
            if state_of(child) != "Z":
                found.add(child)
                todo.append(child)
    return found


@pytest.mark.process
@pytest.mark.slow
def test_a_master_killed_leaves_no_process_behind(tmp_path):
    """SIGKILL of the master (the OOM killer): its workers, their indexer and the early
    walk are gone within seconds, none left serving or holding the index's locks."""
    serve = Serve(
        tmp_path, "--state-dir", str(tmp_path / "state"), "--no-announce", "--workers", "2"
    )
    try:
        serve.wait_answering()
        serve.wait_log("watching ")
        left = _descendants(serve.process.pid)
        assert len(left) >= 3, left  # two workers and the indexer
        serve.process.kill()
        serve.process.wait()
        wait_until(
            lambda: not any(state_of(pid) not in ("gone", "Z") for pid in left),
            10,
            f"{left} to stop after the master's SIGKILL",
        )
    finally:
        serve.kill()
