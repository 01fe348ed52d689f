"""The real `archive-service serve` process on a free loopback port, its log in a file."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "sample_collection"
SERVICE = "sid.inpe.br/mtc-m18@80/2008/03.17.15.17"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class Serve:
    """`archive-service serve --config CONFIG ARGS`, listening on 127.0.0.1:<free port>."""

    def __init__(self, tmp_path: Path, *args: str, env: dict[str, str] | None = None,
                 config: Path = SAMPLE / "archive-service.yaml"):
        self.port = free_port()
        self.address = f"127.0.0.1:{self.port}"
        self.log_path = tmp_path / f"serve-{self.port}.log"
        command = [sys.executable, "-m", "archive_service.cli", "serve",
                   "--config", str(config),
                   "--bind", self.address, "--archiveaddress", self.address, *args]
        with open(self.log_path, "wb") as log:
            self.process = subprocess.Popen(command, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT,
                                            stdin=subprocess.DEVNULL, env={**os.environ, **(env or {})})

    @property
    def url(self) -> str:
        return f"http://{self.address}/{SERVICE}"

    def get(self, query: str = "servicesubject=inclusionConfirmationRequest",
            timeout: float = 5) -> str:
        with urllib.request.urlopen(f"{self.url}?{query}", timeout=timeout) as response:
            return response.read().decode("ascii")

    def wait_answering(self, timeout: float = 30) -> None:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if self.process.poll() is not None:
                raise AssertionError(f"serve exited with {self.process.returncode}:\n{self.log()}")
            try:
                if self.get(timeout=1) == "confirmation yes":
                    return
            except OSError:
                time.sleep(0.05)
        raise AssertionError(f"serve did not answer within {timeout} s:\n{self.log()}")

    def wait_log(self, text: str, count: int = 1, timeout: float = 30) -> None:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if self.log().count(text) >= count:
                return
            time.sleep(0.05)
        raise AssertionError(f"{text!r} not logged {count} time(s) within {timeout} s:\n{self.log()}")

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def workers(self) -> list[int]:
        """Worker pids: children of the master other than the announcer."""
        found = []
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
                cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
            except OSError:
                continue
            state, parent = stat.rsplit(")", 1)[1].split()[:2]
            if (int(parent) == self.process.pid and state != "Z"  # an exited announcer
                    and b"archive_service.serve.announce import" not in cmdline):
                found.append(int(entry))
        return sorted(found)

    def signal(self, number: int) -> None:
        self.process.send_signal(number)

    def stop(self, timeout: float = 30) -> int:
        """SIGTERM, like systemd; the exit status (AssertionError if it takes over `timeout`)."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
            raise AssertionError(f"serve did not stop within {timeout} s:\n{self.log()}") from None

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()
