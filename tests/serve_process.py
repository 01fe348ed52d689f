"""Our own programs as real child processes: `free_port`, the one launcher of any
`archive-service` command (`Process`) and, on top of it, `Serve`, the Archive's `serve` on a
free loopback port. Every test that starts one of our processes starts it through here."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

# gunicorn's line for each worker it forks (arbiter.spawn_worker), in either log format.
BOOTED = re.compile(r"Booting worker with pid: (\d+)")


ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "sample_collection"
SERVICE = "sid.inpe.br/mtc-m18@80/2008/03.17.15.17"
# serve's settings for announcing, but the resolver and the key (the tests' own)
ANNOUNCING = (
    "--archiveip",
    "127.0.0.1",
    "--archiveadmemailaddress",
    "admin@example.org",
    "--exclusion-timeout",
    "2",
)


def free_port() -> int:
    """A loopback port nothing listens on (the kernel's pick; free until someone binds it)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


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


def state_of(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[0].decode()
    except OSError:
        return "gone"


class _EveryAnswer(urllib.request.HTTPErrorProcessor):
    """Every status is an answer to return, none an error to raise or a redirect to follow
    (an exception per redirect made the resolver's benchmark client dearer for it than for
    the floor it is compared with)."""

    def http_response(self, request, response):
        return response


_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}), _EveryAnswer())


def http_get(url: str, headers: dict | None = None, timeout: float = 30):
    """(status, headers, body) of one GET, redirects not followed."""
    request = urllib.request.Request(url, headers=headers or {})
    try:
        with _OPENER.open(request, timeout=timeout) as response:
            return response.status, response.headers, response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.headers, exc.read()


def wait_until(predicate, timeout: float = 15, what: str = "condition", every: float = 0.05):
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(every)


class Process:
    """`python -m archive_service.cli ARGS` as a real process, its output appended to `log`.
    `env` adds to (or, with None values, removes from) the test's environment; `own_group`:
    in a process group of its own, which a test can signal whole, as a terminal's Ctrl-C does."""

    def __init__(
        self,
        args: list[str],
        log: Path,
        env: dict[str, str | None] | None = None,
        own_group: bool = False,
        program: list[str] | None = None,
    ):
        self.args, self.log = list(args), log
        self.env = env or {}
        self.own_group = own_group
        # Another program instead of `python -m archive_service.cli` (e.g. a systemd unit's
        # ExecStart= run as its User=).
        self.program = program or [sys.executable, "-m", "archive_service.cli"]
        self.proc: subprocess.Popen | None = None

    def start(self) -> Process:
        env = dict(os.environ, PYTHONPATH=str(ROOT), PYTHONUNBUFFERED="1")
        for name, value in self.env.items():
            if value is None:
                env.pop(name, None)
            else:
                env[name] = value
        with open(self.log, "ab") as out:
            self.proc = subprocess.Popen(
                [*self.program, *self.args],
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                cwd=ROOT,
                env=env,
                process_group=0 if self.own_group else None,
            )
        return self

    def text(self) -> str:
        return self.log.read_text(errors="replace")

    def check_running(self) -> None:
        if self.proc.poll() is not None:
            raise AssertionError(
                f"{self.args[0]} exited {self.proc.returncode}:\n" + self.text()[-3000:]
            )

    def wait_answering(self, url: str, timeout: float = 30) -> None:
        def up():
            self.check_running()
            try:
                return http_get(url, timeout=2)[0] == 200
            except OSError:
                return False

        wait_until(up, timeout, f"{url} to answer")

    def wait_log(self, text: str, count: int = 1, timeout: float = 30) -> None:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if self.text().count(text) >= count:
                return
            time.sleep(0.05)
        raise AssertionError(
            f"{text!r} not logged {count} time(s) within {timeout} s:\n" + self.text()
        )

    def stop(self, sig=signal.SIGTERM, timeout: float = 20) -> int:
        """Send `sig` (SIGTERM, like systemd); the exit status (AssertionError, the process
        killed, if it takes over `timeout`)."""
        if self.proc is None or self.proc.poll() is not None:
            return self.proc.returncode if self.proc else 0
        self.proc.send_signal(sig)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise AssertionError(
                f"{self.args[0]} did not stop within {timeout} s:\n" + self.text()[-3000:]
            ) from None

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def resolver_serve(base: Path, *args: str) -> tuple[Process, str]:
    """`archive-service resolver serve` with its state in `base`/state on a free loopback
    port, started and answering: the process (the caller ends it) and its URL."""
    port = free_port()
    process = Process(
        ["resolver", "serve", "--state-dir", str(base / "state")]
        + ["--bind", f"127.0.0.1:{port}", *args],
        base / "resolver.log",
    ).start()
    url = f"http://127.0.0.1:{port}"
    try:
        process.wait_answering(f"{url}/")
    except BaseException:
        process.kill()
        raise
    return process, url


class Serve:
    """`archive-service serve --config CONFIG ARGS`, listening on 127.0.0.1:<free port>
    (`config=None`: no --config, the settings all in ARGS)."""

    def __init__(
        self,
        tmp_path: Path,
        *args: str,
        env: dict[str, str] | None = None,
        config: Path | None = SAMPLE / "archive-service.yaml",
        own_group: bool = False,
    ):
        self.port = free_port()
        self.address = f"127.0.0.1:{self.port}"
        self.log_path = tmp_path / f"serve-{self.port}.log"
        self.log_path.write_bytes(b"")
        head = ["serve", "--config", str(config)] if config is not None else ["serve"]
        self.child = Process(
            [*head, "--bind", self.address, "--archiveaddress", self.address, *args],
            self.log_path,
            env,
            own_group,
        ).start()
        self.process = self.child.proc

    @property
    def url(self) -> str:
        return f"http://{self.address}/{SERVICE}"

    def get(
        self, query: str = "servicesubject=inclusionConfirmationRequest", timeout: float = 5
    ) -> str:
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
        self.child.wait_log(text, count, timeout)

    def log(self) -> str:
        return self.child.text()

    def workers(self) -> list[int]:
        """Worker pids: the living children of the master that gunicorn said it booted. Not
        every child is a worker: the announcer (serve/lifecycle.py) and the early walk
        (indexer/startup.py `refresh_early`, a fork that keeps the master's command line and
        ends when the walk does) are children too."""
        booted = {int(pid) for pid in BOOTED.findall(self.log())}
        found = []
        for pid in booted:
            try:
                stat = Path(f"/proc/{pid}/stat").read_text()
            except OSError:
                continue
            state, parent = stat.rsplit(")", 1)[1].split()[:2]
            if int(parent) == self.process.pid and state != "Z":
                found.append(pid)
        return sorted(found)

    def signal(self, number: int) -> None:
        self.process.send_signal(number)

    def stop(self, timeout: float = 30) -> int:
        """SIGTERM, like systemd; the exit status (AssertionError if it takes over `timeout`)."""
        return self.child.stop(signal.SIGTERM, timeout)

    def kill(self) -> None:
        self.child.kill()


class Dribbler(threading.Thread):
    """A slowloris client: it sends a request line and then one header byte every 0.2 s,
    never ending its headers; `closed_after` is when the server dropped it."""

    def __init__(self, address: str):
        super().__init__(daemon=True)
        host, port = address.split(":")
        self.sock = socket.create_connection((host, int(port)), timeout=5)
        self.sock.sendall(f"GET /{SERVICE} HTTP/1.1\r\nHost: {address}\r\nX-A: ".encode())
        self.opened = time.monotonic()
        self.closed_after: float | None = None
        self.stop = threading.Event()

    def run(self) -> None:
        try:
            while not self.stop.wait(0.2):
                self.sock.sendall(b"a")
        except OSError:
            self.closed_after = time.monotonic() - self.opened
        finally:
            self.sock.close()


def serve_collection(
    tmp_path: Path, collection: Path, state: Path, env: dict[str, str] | None = None
) -> Serve:
    """`serve` of `collection` with its own state directory, two workers, announcing nothing."""
    return Serve(
        tmp_path,
        "--collection",
        str(collection),
        "--state-dir",
        str(state),
        "--no-announce",
        "--workers",
        "2",
        env=env,
    )


def command(args: list[str], env: dict[str, str] | None = None, **popen) -> subprocess.Popen:
    """`python -m archive_service.cli ARGS` with the pipes a test asks for (`popen`), for a
    command whose output the test reads itself (a pipe closed early, stderr's exact lines)."""
    return subprocess.Popen(
        [sys.executable, "-m", "archive_service.cli", *args],
        cwd=ROOT,
        env=dict(os.environ, PYTHONPATH=str(ROOT), **(env or {})),
        **popen,
    )


def run_command(args: list[str], env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """`command` run to its end, its stdout and stderr as text."""
    child = command(args, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    out, err = child.communicate(timeout=60)
    return subprocess.CompletedProcess(args, child.returncode, out, err)
