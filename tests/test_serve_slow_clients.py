"""The real `archive-service serve` and clients that are slow on purpose: a download that takes
longer than the timeout completes and is logged with its size; clients that dribble their
request, or send nothing, neither take the service down nor keep their connection for ever."""

from __future__ import annotations

import os
import re
import socket
import time
import urllib.request
from pathlib import Path

import pytest

from archive_service.testing import wait_until
from serve_process import SERVICE, Dribbler, Serve

pytestmark = pytest.mark.process

ITEM_DIR = "iconet.com.br/banon/2009/09.09.22.01"
LATENCY = 1.0  # what a normal request may take while slow clients are connected


def serve(collection: Path, tmp_path: Path, *args: str) -> Serve:
    config = tmp_path / "archive-service.yaml"
    config.write_text(
        f"collection: {collection}\narchiveserviceibi: {SERVICE}\n"
        f"resolver: none\nstate_dir: {tmp_path / 'state'}\n"
    )
    process = Serve(tmp_path, *args, config=config)
    process.wait_answering()
    return process


def slow_download(address: str, path: str, rate: float) -> tuple[bytes, bytes, float]:
    """GET `path` reading at most `rate` bytes a second through a small receive buffer, so the
    server is sending for about as long as the client takes to read (head, body, seconds)."""
    host, port = address.split(":")
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 32 * 1024)
        sock.connect((host, int(port)))
        sock.sendall(
            f"GET {path} HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\n\r\n".encode("ascii")
        )
        data = bytearray()
        start = time.monotonic()
        while chunk := sock.recv(16 * 1024):
            data += chunk
            ahead = len(data) / rate - (time.monotonic() - start)
            if ahead > 0:
                time.sleep(ahead)
        seconds = time.monotonic() - start
    head, _, body = bytes(data).partition(b"\r\n\r\n")
    return head, body, seconds


@pytest.mark.slow
def test_a_download_longer_than_the_timeout_completes_and_is_logged_whole(collection, tmp_path):
    size = 24 * 1024 * 1024  # at 6 MB/s: 4 s, four times the timeout below
    content = os.urandom(size)
    (collection / ITEM_DIR / "doc" / "big.bin").write_bytes(content)
    service = serve(collection, tmp_path, "--client-timeout", "1")
    try:
        path = f"/col/{ITEM_DIR}/doc/big.bin"
        head, body, seconds = slow_download(service.address, path, 6 * 1024 * 1024)
        assert head.startswith(b"HTTP/1.1 200"), head
        assert len(body) == size and body == content, f"{len(body)} bytes in {seconds:.1f} s"
        assert seconds > 3, "the client did not read slowly: the test proves nothing"
        # The access log gives the bytes sent, not 0.
        assert wait_until(lambda: f'"GET {path} HTTP/1.1" 200 {size} ' in service.log(), 5), (
            service.log()
        )
    finally:
        service.stop()


def test_a_client_that_stops_reading_is_dropped_and_logged_with_what_it_got(collection, tmp_path):
    size = 24 * 1024 * 1024
    (collection / ITEM_DIR / "doc" / "big.bin").write_bytes(os.urandom(size))
    service = serve(collection, tmp_path, "--client-timeout", "1")
    try:
        path = f"/col/{ITEM_DIR}/doc/big.bin"
        host, port = service.address.split(":")
        with socket.socket() as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 32 * 1024)
            sock.connect((host, int(port)))
            sock.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\n\r\n".encode("ascii"))
            time.sleep(3)  # reads nothing: the service gives up after client_timeout
            sock.settimeout(5)
            received = 0
            try:
                while chunk := sock.recv(1024 * 1024):
                    received += len(chunk)
            except ConnectionResetError:
                pass
        assert received < size
        logged = re.compile(rf'"GET {re.escape(path)} HTTP/1.1" 200 (\d+) ')
        assert wait_until(lambda: logged.search(service.log()), 5), service.log()
        sent = int(logged.search(service.log()).group(1))
        assert 0 < sent < size  # what went out, not the file's size, nor 0
    finally:
        service.stop()


def normal_latency(service: Serve) -> float:
    start = time.monotonic()
    with urllib.request.urlopen(
        f"{service.url}?servicesubject=inclusionConfirmationRequest", timeout=5
    ) as response:
        assert response.read() == b"confirmation yes"
    return time.monotonic() - start


@pytest.mark.slow
def test_slow_and_idle_clients_neither_stop_the_service_nor_stay(collection, tmp_path):
    service = serve(collection, tmp_path, "--client-timeout", "2")
    host, port = service.address.split(":")
    slow = [Dribbler(service.address) for _ in range(8)]
    idle: list[socket.socket] = []
    try:
        for client in slow:
            client.start()
        time.sleep(0.5)  # every slow client has a worker's attention by now
        latencies = [normal_latency(service) for _ in range(10)]
        assert max(latencies) < LATENCY, latencies
        # A request must arrive whole within client_timeout of its first byte.
        assert wait_until(lambda: all(c.closed_after is not None for c in slow), 6), [
            c.closed_after for c in slow
        ]
        assert all(c.closed_after < 2 + 2 for c in slow), [c.closed_after for c in slow]
        # Connections that send nothing: the service answers meanwhile, and closes them.
        idle += [socket.create_connection((host, int(port))) for _ in range(8)]
        time.sleep(0.5)
        latencies = [normal_latency(service) for _ in range(10)]
        assert max(latencies) < LATENCY, latencies
        for sock in idle:
            sock.settimeout(15)
            assert sock.recv(1) == b""
    finally:
        for client in slow:
            client.stop.set()
        for sock in idle:
            sock.close()
        service.stop()
