"""The real `archive-service resolver serve` and slowloris clients: more of them than it has
threads no longer hold it for ever; each is dropped after the resolver's `timeout` (the
seconds it gives an Archive to answer), and the resolver answers again."""

from __future__ import annotations

import time

import pytest

from serve_process import Dribbler, Process, free_port, http_get

pytestmark = pytest.mark.process


def test_slow_clients_are_dropped_and_the_resolver_answers_again(tmp_path):
    port = free_port()
    resolver = Process(
        [
            "resolver",
            "serve",
            "--state-dir",
            str(tmp_path / "state"),
            "--bind",
            f"127.0.0.1:{port}",
            "--threads",
            "2",
            "--timeout",
            "1",
        ],
        tmp_path / "resolver.log",
    )
    url = f"http://127.0.0.1:{port}/"
    slow: list[Dribbler] = []
    resolver.start()
    try:
        resolver.wait_answering(url)
        slow = [Dribbler(f"127.0.0.1:{port}") for _ in range(4)]  # twice its threads
        for client in slow:
            client.start()
        time.sleep(0.5)
        start = time.monotonic()
        assert http_get(url, timeout=8)[0] == 200  # once the slow ones are dropped
        assert time.monotonic() - start < 1 + 2
    finally:
        for client in slow:
            client.stop.set()
        resolver.stop()
    assert "no proxy in front" not in (tmp_path / "resolver.log").read_text()  # loopback


def test_a_resolver_reachable_from_other_machines_without_a_proxy_is_warned_of(tmp_path):
    """As serve is (issue 30 §13): 300 connections dribbling their headers left a bare
    `resolver serve` unanswered for over 60 s (behind nginx, 3.2 ms), and nothing at its start
    said so to an admin listening on every interface."""
    port = free_port()
    log = tmp_path / "resolver.log"
    resolver = Process(
        ["resolver", "serve", "--state-dir", str(tmp_path / "state"), "--bind", f"0.0.0.0:{port}"],
        log,
    )
    resolver.start()
    try:
        resolver.wait_answering(f"http://127.0.0.1:{port}/health")
    finally:
        resolver.stop()
    warned = [line for line in log.read_text().splitlines() if "no proxy in front" in line]
    assert len(warned) == 1, log.read_text()
    assert f"resolver serve listens on 0.0.0.0:{port} with no proxy in front" in warned[0]
