"""A real `archive-service serve` on a free loopback port, and what tests need to poke it."""

from __future__ import annotations

import http.client
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import urlencode

from conftest import ROOT, SERVICE


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Server:
    def __init__(self, collection: Path, state_dir: Path, workers: int = 2, log: Path | None = None):
        self.port = free_port()
        self.address = f"127.0.0.1:{self.port}"
        self.log = log or state_dir.parent / "serve.log"
        self._log_stream = open(self.log, "wb")
        env = dict(os.environ, PYTHONPATH=str(ROOT))
        self.process = subprocess.Popen(
            [sys.executable, "-m", "archive_service.cli", "serve", "--collection", str(collection),
             "--archiveaddress", self.address, "--archiveserviceibi", SERVICE,
             "--state-dir", str(state_dir), "--bind", self.address, "--workers", str(workers),
             "--resolver", "none"],
            stdout=self._log_stream, stderr=subprocess.STDOUT, env=env, cwd=ROOT)
        self.wait_ready()
        self.wait_workers(workers)

    def wait_ready(self, timeout: float = 20) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.process.poll() is None, self.log.read_text()
            try:
                if self.get(f"/{SERVICE}?servicesubject=inclusionConfirmationRequest")[0] == 200:
                    return
            except OSError:
                time.sleep(0.05)
        raise AssertionError("serve did not answer: " + self.log.read_text())

    def connection(self, timeout: float = 10) -> http.client.HTTPConnection:
        return http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)

    def get(self, path: str, headers: dict | None = None) -> tuple[int, bytes]:
        conn = self.connection()
        try:
            conn.request("GET", path, headers=headers or {})
            response = conn.getresponse()
            return response.status, response.read()
        finally:
            conn.close()

    def service(self, **params: str) -> tuple[int, bytes]:
        return self.get(f"/{SERVICE}?" + urlencode(params))

    def workers(self) -> set[int]:
        """The master's children, read from /proc (no psutil)."""
        found = set()
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                with open(f"/proc/{entry}/stat", "rb") as stream:
                    fields = stream.read().rsplit(b")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == self.process.pid and fields[0] != b"Z":
                found.add(int(entry))
        return found

    def wait_workers(self, count: int, exclude: set[int] = frozenset(), timeout: float = 20) -> set[int]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            pids = self.workers()
            if len(pids) == count and not pids & exclude:
                return pids
            time.sleep(0.05)
        raise AssertionError(f"workers are {self.workers()}, wanted {count} new ones")

    def worker_serving(self, client: socket.socket) -> int:
        """The worker holding the server side of `client`'s connection (/proc/net/tcp inode)."""
        local_port = client.getsockname()[1]
        inode = None
        with open("/proc/net/tcp") as table:
            for line in table.readlines()[1:]:
                fields = line.split()
                local, remote = fields[1], fields[2]
                if int(local.split(":")[1], 16) == self.port and int(remote.split(":")[1], 16) == local_port:
                    inode = fields[9]
        assert inode, "no server socket for this connection"
        for pid in self.workers():
            try:
                fds = os.listdir(f"/proc/{pid}/fd")
            except OSError:
                continue
            for fd in fds:
                try:
                    if os.readlink(f"/proc/{pid}/fd/{fd}") == f"socket:[{inode}]":
                        return pid
                except OSError:
                    continue
        raise AssertionError("no worker holds the connection")

    def stop(self) -> int:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self._log_stream.close()
        return self.process.returncode
