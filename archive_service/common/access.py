"""The access log of both servers (the Archive's and the resolver's): one line a request,
without secrets (`redact`), built straight from the request (`Access`), as text in Apache's
combined format or as a JSON object (common/logs.py `log_format`), and written by a thread
of the worker in batches (`Lines`). gunicorn's own path made a dict of ~40 atoms (every
header and environ key) and went through logging's locks and a write per line: 11-17 % of a
urlRequest (issue 35)."""

from __future__ import annotations

import atexit
import collections
import os
import re
import threading
import time
from collections.abc import Callable
from urllib.parse import unquote_plus

from . import logs

# NAME=VALUE in a query string (or a request line). The name is compared decoded: Werkzeug
# decodes every escape of a name, so `%61pi_key=KEY` is the api_key too, and a pattern of
# the name's spellings (`api_key`, `api%5fkey`) left that key in the log.
_PARAMETER = re.compile(r"((?:^|[?&;])([^=&;?\s]*)=)[^&;\s]*")
SECRET_NAMES = frozenset(("api_key", "registrationkey"))


# A parameter that may be secret: a name holding an escape, or one of SECRET_NAMES as it is;
# at the start (`match`) or after a separator (`search`). One pattern with `(?:^|[?&;])`
# took 3 times as long: the engine no longer skips to the separators (11 µs a urlRequest).
_NAME = r"(?:[^=&;?\s%]*%|(?:" + "|".join(sorted(SECRET_NAMES)) + ")=)"
_MAYBE_SECRET_FIRST = re.compile(_NAME, re.IGNORECASE)
_MAYBE_SECRET = re.compile(r"[?&;]" + _NAME, re.IGNORECASE)


def redact(text: str) -> str:
    """`text` with the value of each secret parameter (SECRET_NAMES) as `<secret>`."""
    if "=" not in text or not (_MAYBE_SECRET.search(text) or _MAYBE_SECRET_FIRST.match(text)):
        return text
    return _PARAMETER.sub(
        lambda m: (
            m.group(1) + "<secret>"
            if unquote_plus(m.group(2)).lower() in SECRET_NAMES
            else m.group(0)
        ),
        text,
    )


# What a server adds to each line: (JSON name, text form, "o" a response header or "e" an
# environ key, its name lowercased).
Extra = tuple[str, str, str, str]


class Access:
    """The line of one request. Text: gunicorn's default `access_log_format` (Apache's
    combined format, quotes in values escaped as gunicorn's SafeAtoms does), then `extras`;
    the same line gunicorn's generic path made (tests/test_access_log.py holds it to it)."""

    def __init__(self, as_json: bool, extras: tuple[Extra, ...] = (), user=None):
        self.as_json, self.extras = as_json, extras
        self.user: Callable[[dict], str | None] = user or (lambda environ: None)
        self._second, self._stamp = -1, ""

    def now(self) -> str:
        # gunicorn's time.strftime for each line, once a second here
        second = int(time.time())
        if second != self._second:
            self._stamp = time.strftime("[%d/%b/%Y:%H:%M:%S %z]", time.localtime(second))
            self._second = second
        return self._stamp

    def line(self, resp, environ: dict, request_time) -> str:
        status = resp.status
        if isinstance(status, str):
            status = status.split(None, 1)[0]
        sent = getattr(resp, "sent", None)
        method, protocol = environ["REQUEST_METHOD"], environ["SERVER_PROTOCOL"]
        # The request line whole, as gunicorn's `r`: a path such as `/=?api_key=K` read
        # alone takes `/=` for a parameter whose value runs over the key.
        request = redact(f"{method} {environ['RAW_URI']} {protocol}")
        referer = environ.get("HTTP_REFERER")
        if referer is not None:
            referer = redact(referer)
        agent = environ.get("HTTP_USER_AGENT")
        if self.as_json:
            uri = request[len(method) + 1 : -len(protocol) - 1]
            return self._json(resp, environ, request_time, status, sent, uri, referer, agent)
        user = self.user(environ) if "HTTP_AUTHORIZATION" in environ else None
        text = (
            f"{_quoted(environ.get('REMOTE_ADDR', '-'))} - {_quoted(user or '-')} {self.now()} "
            f'"{_quoted(request)}" {_quoted(status)} {"-" if sent is None else sent} '
            f'"{_quoted(_or_dash(referer))}" "{_quoted(_or_dash(agent))}"'
        )
        for _, form, kind, name in self.extras:
            text += " " + form.format(_quoted(_or_dash(_extra(resp, environ, kind, name))))
        return text + "\n"

    def _json(self, resp, environ, request_time, status, sent, uri, referer, agent) -> str:
        method = environ["REQUEST_METHOD"]
        fields = {
            "time": logs.stamp(time.time()),
            "level": "INFO",
            "logger": "gunicorn.access",
            "message": f"{method} {uri} {status}",
            "pid": os.getpid(),
            "method": method,
            "path": uri,
            "status": int(status) if str(status).isdigit() else status,
            "bytes": sent,
            "duration": round(request_time.total_seconds(), 6),
            "client": environ.get("REMOTE_ADDR"),
            "referer": referer,
            "user_agent": agent,
        }
        for name, _, kind, key in self.extras:
            fields[name] = _extra(resp, environ, kind, key)
        return logs.json_line(fields) + "\n"


def _or_dash(value):
    return "-" if value is None else value


def _quoted(value) -> str:
    return value.replace('"', '\\"') if isinstance(value, str) else str(value)


def _extra(resp, environ: dict, kind: str, name: str):
    if kind == "e":
        return environ.get(name)
    found = None
    for header, value in resp.headers:
        if header.lower() == name:
            found = value  # the last one, as gunicorn's atoms dict kept
    return found


class Lines:
    """Lines written by the process that wrote them, in batches: a thread of the worker waits
    for the first line, gathers for `every` seconds, then writes them all, cut at line ends
    into writes of at most PIPE_BUF bytes, which a pipe or journald's stream keeps whole
    beside the other workers' lines. What is still waiting when the worker exits (SIGTERM, a
    graceful restart, SIGQUIT) is written by `flush` at exit; a SIGKILL loses at most the
    last `every` seconds."""

    def __init__(self, fd: int, every: float = 0.2):
        self.fd, self.every = fd, every
        self._forked()
        os.register_at_fork(after_in_child=self._forked)

    def _forked(self) -> None:
        # A forked process writes only its own lines (its parent's are its parent's), with
        # a lock nobody can hold and a thread of its own, started on its first line.
        self.waiting: collections.deque[str] = collections.deque()
        self.dropped = 0  # lines not kept while MAX_WAITING (or MAX_WAITING_CHARS) waited
        # Characters queued since the queue was last emptied (`flush` sets it to 0, so that
        # a count lost between threads never builds up).
        self.chars = 0
        self.lock = threading.Lock()
        self.pending = threading.Event()
        self.started = False

    def write(self, line: str) -> None:
        if not self.started:
            self._start()
        # The log cannot be written (a stalled reader). In characters too: a line is up to
        # ~48 KB (an 8 KB request line, Referer and User-Agent of quotes, each escaped).
        if len(self.waiting) >= MAX_WAITING or self.chars >= MAX_WAITING_CHARS:
            self.dropped += 1
            return
        # Appended first: a flush that has just emptied the queue either takes this line or
        # leaves it alone in it, and then it is the first, which sets `pending`.
        self.waiting.append(line)
        self.chars += len(line)
        if len(self.waiting) == 1:
            self.pending.set()

    def _start(self) -> None:
        with self.lock:
            if self.started:
                return
            threading.Thread(target=self._run, name="access-log", daemon=True).start()
            atexit.register(self.flush)
            self.started = True

    def _run(self) -> None:
        while True:
            self.pending.wait()
            time.sleep(self.every)
            self.pending.clear()
            self.flush()

    def flush(self) -> None:
        with self.lock:
            chunk: list[bytes] = []
            size = 0
            if self.dropped:
                dropped, self.dropped = self.dropped, 0
                self.waiting.append(f"archive-service: {dropped} access log lines dropped\n")
            while self.waiting:
                data = self.waiting.popleft().encode("utf-8", "backslashreplace")
                if chunk and size + len(data) > PIPE_BUF:
                    self._send(b"".join(chunk))
                    chunk, size = [], 0
                chunk.append(data)
                size += len(data)
            self.chars = 0
            if chunk:
                self._send(b"".join(chunk))

    def _send(self, data: bytes) -> None:
        try:
            while data:
                data = data[os.write(self.fd, data) :]
        except OSError:
            pass  # nobody reads the log any more (a closed pipe): the request was answered


# Lines kept while the log is not written (its reader stalled): some seconds of a busy
# server's lines, a few MB, rather than memory without end. Counted in lines alone, 3,000
# requests with 8 KB of quotes in their Referer and User-Agent kept 110 MB in a resolver
# worker whose log was not read (the seventh adversarial pass): ~2.4 GB at 50,000.
MAX_WAITING = 50_000
MAX_WAITING_CHARS = 16 << 20
PIPE_BUF = 4096  # POSIX's least: writes up to it are never interleaved with others' on a pipe
