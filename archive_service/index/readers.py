"""The reading processes of a first build: a big collection's index built from nothing (or
an interrupted build resumed) walks and parses sidecars in several processes (`_Readers`),
forked where the builder runs one thread (`_ForkedReader`), else new Pythons running
`reading_process`. Each holds one chunk at a time and sends back rows (`records.read_item`);
only the builder (`store.Writer`) writes."""

from __future__ import annotations

import logging
import os
import pickle
import select
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import NamedTuple

from ..common.processes import child_environment, python_executable
from .records import _ibi, _Row, read_item
from .walk import Found, Walk

log = logging.getLogger(__name__)


def _send(stream, message) -> None:
    data = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    stream.write(len(data).to_bytes(8, "big") + data)
    stream.flush()


def _receive(stream):
    """The next message, or None at end of file."""
    head = stream.read(8)
    if len(head) < 8:
        return None
    size = int.from_bytes(head, "big")
    data = stream.read(size)
    if len(data) < size:
        return None
    return pickle.loads(data)


class _Mtime(NamedTuple):
    st_mtime: float  # all index.load_item needs of a file's stat
    st_mode: int


def _pack(chunk: list[tuple[Found, bool]]) -> list[tuple]:
    # Plain tuples: pickling whole stat results costs as much as parsing the sidecar.
    return [
        (
            f.directory,
            f.name.text,
            f.fingerprint,
            [(rel, st.st_mtime, st.st_mode) for rel, st in f.files],
            f.has_sidecar,
        )
        for f, _ in chunk
    ]


def _unpack(packed: tuple) -> Found:
    directory, name, fingerprint, files, has_sidecar = packed
    return Found(
        directory,
        _ibi(name),
        fingerprint,  # the name passed the IBI rules there
        [(rel, _Mtime(mtime, mode)) for rel, mtime, mode in files],
        has_sidecar,
    )


def walk_scope(root: str, scope: str) -> tuple[list[_Row], int]:
    """Walk and read one scope: its items' rows and the directories visited."""
    walk = Walk(root)
    rows = [read_item(Path(root), found) for found in walk.items(scope) if found.valid()]
    return rows, walk.dirs


def _look(root: str, work: str | tuple[str, int]):
    """A scope walked and read (walk_scope), or a (host/word directory, since) looked at for
    what changed since then (changed.changed_below)."""
    if isinstance(work, str):
        return walk_scope(root, work)
    from .changed import changed_below

    return changed_below(root, *work)


def reading_process() -> None:
    """A reading process started as a new Python, on its stdin and stdout."""
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    sys.stdout = sys.stderr  # nothing else may write into the results
    _serve_reads(stdin, stdout)


def _serve_reads(stdin, stdout) -> None:
    """What a reading process does, until end of file on `stdin` (which also comes when the
    build that started it dies): (root, [packed Found]) in, [_Row] out; or (root, scope) in,
    ([_Row], directories visited) out; or (root, (two, since)) in, what changed there out."""
    while (message := _receive(stdin)) is not None:
        root, work = message
        if isinstance(work, list):
            _send(stdout, [read_item(Path(root), _unpack(packed)) for packed in work])
        else:
            _send(stdout, _look(root, work))


def _cpus() -> int:
    try:
        return min(len(os.sched_getaffinity(0)), 8)
    except AttributeError:  # not Linux
        return min(os.cpu_count() or 1, 8)


def _walkers() -> int:
    # More processes than CPUs: on a cold page cache each waits on the disk most of the time.
    return min(4 * _cpus(), 16)


def _default_signals() -> None:
    """In a forked child: the default action for every signal its parent handled in Python
    (gunicorn's master, on a reload, handles several through a pipe of its own)."""
    signal.set_wakeup_fd(-1)
    for number in signal.valid_signals():
        try:
            if callable(signal.getsignal(number)):
                signal.signal(number, signal.SIG_DFL)
        except (OSError, ValueError):
            continue


class _ForkedReader:
    """A reading process forked from this one: no interpreter to start and nothing to import
    (a new Python spent 70 ms of a CPU on that, while the builder read in its place). Only made
    where this process runs a single thread, so the child inherits no lock that another
    thread held; it touches nothing of its parent's but its two pipes and leaves through
    os._exit (an inherited SQLite connection must never be closed or used in a child)."""

    def __init__(self, others: list):
        down_r, down_w = os.pipe()
        up_r, up_w = os.pipe()
        try:
            pid = os.fork()
        except OSError:
            for fd in (down_r, down_w, up_r, up_w):
                os.close(fd)
            raise
        if pid == 0:
            code = 1
            try:
                _default_signals()
                os.close(down_w)
                os.close(up_r)
                for other in others:  # so each reader's pipes see end of file when they should
                    other.stdin.close()
                    other.stdout.close()
                with open(down_r, "rb") as stdin, open(up_w, "wb") as stdout:
                    _serve_reads(stdin, stdout)
                code = 0
            finally:
                os._exit(code)
        os.close(down_r)
        os.close(up_w)
        self.pid = pid
        self.stdin = open(down_w, "wb")
        self.stdout = open(up_r, "rb")

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            done, status = os.waitpid(self.pid, 0 if deadline is None else os.WNOHANG)
            if done:
                return os.waitstatus_to_exitcode(status)
            if time.monotonic() >= deadline:
                raise subprocess.TimeoutExpired(f"reading process {self.pid}", timeout)
            time.sleep(0.01)

    def kill(self) -> None:
        os.kill(self.pid, signal.SIGKILL)


class _Readers:
    """Reads the items a refresh finds new or changed: in this process, or, for a first
    build of a big collection, also in `workers` processes of their own (sidecar parsing is
    most of a build's time). A reading process holds one chunk at a time, so neither side
    can block the other on a full pipe; while they are all busy this process reads the next
    chunk itself, and it takes their results as they come (rows may be written in any order)."""

    CHUNK = 200

    def __init__(self, root: Path, workers: int):
        self.root = root
        self.procs: list[subprocess.Popen] = []
        self.idle: list[subprocess.Popen] = []
        self.flying: dict[int, tuple[subprocess.Popen, list]] = {}  # stdout fd -> its chunk
        self.pending: list[tuple[Found, bool]] = []
        command = [
            python_executable(),
            "-c",
            "from archive_service.index.readers import reading_process; reading_process()",
        ]
        fork = threading.active_count() == 1
        for _ in range(workers):
            try:
                if fork:
                    proc = _ForkedReader(self.procs)
                else:
                    proc = subprocess.Popen(
                        command,
                        stdin=subprocess.PIPE,
                        stdout=subprocess.PIPE,
                        env=child_environment(),
                    )
            except OSError as exc:  # out of processes or memory: the build goes on with fewer
                log.warning(
                    "cannot start a reading process (%s); %d read beside this one",
                    exc.strerror or exc,
                    len(self.procs),
                )
                break
            self.procs.append(proc)
            self.idle.append(proc)

    def read(self, found: Found, *, new: bool) -> list[tuple[_Row, bool]]:
        """Read `found` (or queue it); return what has been read, ready to write."""
        if not self.procs:
            return [(read_item(self.root, found), new)]
        self.pending.append((found, new))
        return self._submit() if len(self.pending) >= self.CHUNK else []

    def walk(self, scopes: Iterable[str]) -> Iterator[tuple[list[_Row], int]]:
        """Walk and read each scope in the reading processes (here if they all died):
        ([_Row], directories visited) per scope, in the order they finish."""
        return self._spread(scopes)

    def changes(self, twos: Iterable[str], since: int) -> Iterator[tuple[list[str], list[str]]]:
        """changed.changed_below of each host/word directory, in the order they finish."""
        return self._spread((two, since) for two in twos)

    def _spread(self, works: Iterable) -> Iterator:
        flying: dict[int, tuple[subprocess.Popen, str | tuple]] = {}
        works = iter(works)
        root = str(self.root)
        while True:
            while self.idle and (work := next(works, None)) is not None:
                proc = self.idle.pop()
                try:
                    _send(proc.stdin, (root, work))
                except OSError:
                    yield self._lost_walk(proc, work)
                    continue
                flying[proc.stdout.fileno()] = (proc, work)
            if not flying:
                if not self.procs:  # every reading process died: finish here
                    yield from (_look(root, left) for left in works)
                return
            for fd in select.select(list(flying), [], [])[0]:
                proc, work = flying.pop(fd)
                done = _receive(proc.stdout)
                if done is None:
                    yield self._lost_walk(proc, work)
                    continue
                self.idle.append(proc)
                yield done

    def _lost_walk(self, proc: subprocess.Popen, work: str | tuple):
        log.warning("a reading process (pid %d) died; walking %s here", proc.pid, work)
        self.procs.remove(proc)
        self._stop(proc)
        return _look(str(self.root), work)

    def drain(self) -> list[tuple[_Row, bool]]:
        ready = self._submit() if self.pending else []
        while self.flying:
            ready += self._collect(block=True)
        return ready

    def _submit(self) -> list[tuple[_Row, bool]]:
        chunk, self.pending = self.pending, []
        ready = self._collect(block=False)
        if not self.idle:
            return ready + [(read_item(self.root, found), new) for found, new in chunk]
        proc = self.idle.pop()
        try:
            _send(proc.stdin, (str(self.root), _pack(chunk)))
        except OSError:
            return ready + self._lost(proc, chunk)
        self.flying[proc.stdout.fileno()] = (proc, chunk)
        return ready

    def _collect(self, *, block: bool) -> list[tuple[_Row, bool]]:
        if not self.flying:
            return []
        readable, _, _ = select.select(list(self.flying), [], [], None if block else 0)
        ready = []
        for fd in readable:
            proc, chunk = self.flying.pop(fd)
            rows = _receive(proc.stdout)
            if rows is None:
                ready += self._lost(proc, chunk)
                continue
            self.idle.append(proc)
            ready += zip(rows, (new for _, new in chunk))
        return ready

    def _lost(self, proc: subprocess.Popen, chunk) -> list[tuple[_Row, bool]]:
        log.warning("a reading process (pid %d) died; reading its items here", proc.pid)
        self.procs.remove(proc)
        self._stop(proc)
        return [(read_item(self.root, found), new) for found, new in chunk]

    @staticmethod
    def _stop(proc: subprocess.Popen) -> None:
        for stream in (proc.stdin, proc.stdout):
            try:
                stream.close()
            except OSError:
                pass
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()

    def close(self) -> None:
        for proc in self.procs:
            self._stop(proc)
        self.procs, self.idle, self.flying = [], [], {}
