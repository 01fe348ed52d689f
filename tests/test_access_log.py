"""The access log written by common/access.py: the same text line gunicorn's generic path
made (with the keys redacted), its JSON object, and no line lost when a worker exits."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
import textwrap
import threading
from datetime import timedelta

from gunicorn import glogging
from gunicorn.config import Config
from hypothesis import given, settings
from hypothesis import strategies as st

from archive_service.common import access
from archive_service.resolver.server import ACCESS_LOG_FORMAT, ResolverLogger
from serve_process import ROOT

ARCHIVE_FORMAT = Config().access_log_format  # gunicorn's default, the Archive's line
GUNICORN = glogging.Logger(Config())
NOW = "[02/Jan/2026:03:04:05 +0000]"
KEY = "5550001234-9990004321"


class Resp:
    def __init__(self, status, sent, headers):
        self.status, self.sent, self.headers = status, sent, headers


class Req:
    headers: list = []


class Fixed(access.Access):
    def now(self) -> str:
        return NOW


def generic(fmt: str, resp, environ, took) -> str:
    """The line gunicorn's own path made, with our redaction of the request line, query and
    referer, as common/worker.py's Logger.atoms did before."""
    atoms = GUNICORN.atoms(resp, Req(), environ, took)
    atoms["t"] = NOW
    for atom in ("r", "q", "f"):
        if isinstance(atoms.get(atom), str):
            atoms[atom] = access.redact(atoms[atom])
    return fmt % glogging.SafeAtoms(atoms) + "\n"


texts = st.text(st.characters(min_codepoint=33, max_codepoint=126), max_size=30)
queries = st.lists(
    st.tuples(st.sampled_from(["api_key", "API%5Fkey", "registrationkey", "q", "ibi"]), texts),
    max_size=3,
).map(lambda pairs: "&".join(f"{name}={value}" for name, value in pairs))
environs = st.fixed_dictionaries(
    {
        "REQUEST_METHOD": st.sampled_from(["GET", "HEAD", "POST"]),
        "RAW_URI": st.tuples(texts, queries).map(lambda p: f"/{p[0]}?{p[1]}"),
        "SERVER_PROTOCOL": st.just("HTTP/1.1"),
        "REMOTE_ADDR": st.sampled_from(["127.0.0.1", "::1", ""]),
    },
    optional={
        "HTTP_REFERER": st.tuples(texts, queries).map(lambda p: f"http://x/{p[0]}?{p[1]}"),
        "HTTP_USER_AGENT": texts,
        "HTTP_AUTHORIZATION": texts.map(
            lambda user: "Basic " + base64.b64encode(f"{user}:pw".encode()).decode()
        ),
        "archive_service.archive": texts,
    },
)
responses = st.builds(
    Resp,
    st.sampled_from(["200 OK", "302 FOUND", "404 NOT FOUND", 500]),
    st.one_of(st.none(), st.integers(0, 10**9)),
    st.lists(st.tuples(st.sampled_from(["Location", "Content-Type"]), texts), max_size=2),
)


@settings(max_examples=200, deadline=None)
@given(environ=environs, resp=responses, micros=st.integers(0, 10**8))
def test_the_text_line_is_the_one_gunicorn_made(environ, resp, micros):
    took = timedelta(microseconds=micros)
    user = GUNICORN._get_user
    archive = Fixed(False, user=user)
    assert archive.line(resp, environ, took) == generic(ARCHIVE_FORMAT, resp, environ, took)
    resolver = Fixed(False, ResolverLogger.extras, user)
    assert resolver.line(resp, environ, took) == generic(ACCESS_LOG_FORMAT, resp, environ, took)


def test_a_json_line_has_the_request_s_fields_without_its_keys():
    environ = {
        "REQUEST_METHOD": "GET",
        "RAW_URI": f'/svc/r51/reports?api_key={KEY}&x="1"',
        "SERVER_PROTOCOL": "HTTP/1.1",
        "REMOTE_ADDR": "192.0.2.7",
        "HTTP_REFERER": f"http://x/?registrationkey={KEY}",
        "HTTP_USER_AGENT": "curl/8\x1b[31m",
        "archive_service.archive": "sid.inpe.br/a",
    }
    resp = Resp("302 FOUND", 12, [("Location", "http://y/doc")])
    line = access.Access(True, ResolverLogger.extras).line(resp, environ, timedelta(0, 1, 5))
    assert line.endswith("\n") and line.count("\n") == 1 and line.isascii()
    fields = json.loads(line)
    assert KEY not in line
    assert fields["path"] == '/svc/r51/reports?api_key=<secret>&x="1"'
    assert fields["referer"] == "http://x/?registrationkey=<secret>"
    assert (fields["method"], fields["status"], fields["bytes"]) == ("GET", 302, 12)
    assert (fields["duration"], fields["client"]) == (1.000005, "192.0.2.7")
    assert (fields["location"], fields["archive"]) == ("http://y/doc", "sid.inpe.br/a")
    assert {"time", "level", "logger", "message", "pid"} <= fields.keys()


def _run(script: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script)],
        cwd=ROOT,
        capture_output=True,
        timeout=20,
    )


def test_lines_still_waiting_are_written_when_the_process_exits():
    # A timer that never comes: only the exit's flush can write them.
    done = _run(
        """
        import os, signal, sys
        from archive_service.common.access import Lines
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))  # as a gunicorn worker does
        lines = Lines(1, every=3600)
        for n in range(3):
            lines.write(f"line {n}\\n")
        os.kill(os.getpid(), signal.SIGTERM)
        """
    )
    assert done.stdout.decode() == "line 0\nline 1\nline 2\n", done.stderr


def test_a_forked_process_writes_only_its_own_lines():
    done = _run(
        """
        import os
        from archive_service.common.access import Lines
        lines = Lines(1, every=3600)
        lines.write("parent\\n")
        child = os.fork()
        if child == 0:
            lines.write("child\\n")
            lines.flush()
            os._exit(0)
        os.waitpid(child, 0)
        """
    )
    assert sorted(done.stdout.decode().splitlines()) == ["child", "parent"], done.stderr


def test_batches_are_cut_at_line_ends_within_a_pipe_s_atomic_write():
    done = _run(
        """
        import os
        from archive_service.common import access
        sizes = []
        class Counting(access.Lines):
            def _send(self, data):
                sizes.append(len(data))
                super()._send(data)
        lines = Counting(1, every=3600)
        for n in range(100):
            lines.write(f"{n:03d} " + "x" * 195 + "\\n")
        lines.flush()
        os.write(2, repr(sizes).encode())
        """
    )
    sizes = eval(done.stderr.decode())  # noqa: S307 (our own child's list of ints)
    assert max(sizes) <= access.PIPE_BUF and sum(sizes) == 100 * 200
    assert done.stdout.decode().splitlines() == [f"{n:03d} " + "x" * 195 for n in range(100)]


def test_a_log_nobody_reads_holds_a_bounded_queue_and_says_what_it_dropped():
    """A stalled reader (a full pipe) blocks the writing thread: the lines that wait are
    bounded, and those left out are counted in a line of their own once it reads again."""
    read, write = os.pipe()
    lines = access.Lines(write, every=0.01)
    try:
        for n in range(access.MAX_WAITING + 5_000):
            lines.write(f"{n:06d} " + "x" * 90 + "\n")
        assert len(lines.waiting) <= access.MAX_WAITING
        got = bytearray()
        reader = threading.Thread(target=lambda: got.extend(_drain(read)), daemon=True)
        reader.start()
        lines.flush()
        lines.write("last\n")
        lines.flush()
    finally:
        os.close(write)
    reader.join(20)
    text = got.decode()
    assert text.endswith("access log lines dropped\nlast\n")


def _drain(fd: int) -> bytes:
    chunks = []
    while chunk := os.read(fd, 1 << 16):
        chunks.append(chunk)
    return b"".join(chunks)


def test_a_log_nobody_reads_holds_a_bounded_queue_of_long_lines_too():
    # A line is up to ~48 KB (an 8 KB request line, Referer and User-Agent of quotes, each
    # escaped): 50,000 of them were ~2.4 GB, and 3,000 kept 110 MB in a resolver worker whose
    # log was not read (the seventh adversarial pass). Bounded in characters as well.
    read, write = os.pipe()
    lines = access.Lines(write, every=0.01)
    long = "x" * 40_000 + "\n"
    try:
        for _ in range(600):  # 24 MB
            lines.write(long)
        held = sum(len(line) for line in list(lines.waiting))
        assert held <= (16 << 20) + len(long), held  # one line past the bound at most
        assert lines.dropped
    finally:
        os.close(read)  # the writing thread's write fails (EPIPE), the rest is let go
        lines.flush()
        os.close(write)
