"""The gunicorn worker of both servers (the Archive's and the resolver's): gthread whose
client connections time out; and their logger (the error log's format, the access log)."""

from __future__ import annotations

import errno
import re
import signal
import socket
import sys
import time

from gunicorn import glogging
from gunicorn.workers.gthread import ThreadWorker

from ..common import access, logs


def _stream_fd(log) -> int:
    """The descriptor gunicorn's access handler writes to: stdout for "-", else its file."""
    for handler in log.handlers:
        stream = getattr(handler, "stream", None)
        if stream is not None:
            stream.flush()
            return stream.fileno()
    return sys.stdout.fileno()


class Logger(glogging.Logger):
    """gunicorn's error log in the format of every other process of ours (common/logs.py,
    text or JSON); the access log in its own (common/access.py), written in batches."""

    datefmt = None  # logging's default, as in logs.configure()

    def setup(self, cfg) -> None:
        self.error_fmt = logs.line_format()
        super().setup(cfg)
        as_json = logs.chosen() == "json"
        if as_json:
            for handler in self.error_log.handlers:
                handler.setFormatter(logs.formatter())
        self.access_line = access.Access(as_json, self.extras, self._get_user)
        self.access_lines = access.Lines(_stream_fd(self.access_log))

    # gunicorn's lines when it cannot listen: "Connection in use: ('127.0.0.1', 8080)", then
    # "connection to … failed: [Errno 98] …" five times, then "Can't connect to …" and exit 1.
    # An admin read neither which setting to change nor why; one line each now says both.
    _BIND_FAILED = re.compile(r"connection to .* failed: (.*)")
    _BIND_HINTS = {
        errno.EADDRINUSE: "another process listens there (ss -ltnp shows which): stop it, "
        "or give another bind",
        errno.EADDRNOTAVAIL: "no interface of this machine has that address: give one it "
        "has, 127.0.0.1 or 0.0.0.0",
        errno.EACCES: "ports below 1024 need privileges: listen on a higher port behind the "
        "web server",
    }
    bind_failure = ""

    def error(self, msg, *args, **kwargs) -> None:
        if isinstance(msg, str) and self._rewrite_bind_error(msg):
            return
        super().error(msg, *args, **kwargs)

    def _rewrite_bind_error(self, msg: str) -> bool:
        if msg.startswith(("Connection in use: ", "Invalid address: ")):
            return True  # the next line says it, with the system's reason
        bind = ", ".join(getattr(self.cfg, "bind", None) or ()) or "?"
        failed = self._BIND_FAILED.match(msg)
        if failed:
            self.bind_failure = failed.group(1)
            self.warning("cannot listen on %s (%s); trying again in 1 s", bind, failed.group(1))
            return True
        if msg.startswith("Can't connect to "):
            number = re.match(r"\[Errno (\d+)\]", self.bind_failure)
            hint = self._BIND_HINTS.get(int(number.group(1)) if number else 0)
            super().error(
                "cannot listen on %s (setting bind): %s%s",
                bind,
                self.bind_failure or "failed",
                f"; {hint}" if hint else "",
            )
            return True
        return False

    # What a server adds to gunicorn's combined line (common/access.py `Extra`).
    extras: tuple[access.Extra, ...] = ()

    def access(self, resp, req, environ, request_time) -> None:
        # Keys come in query strings (COUNTER_SUSHI's api_key to the Archive, an Archive's
        # registrationkey to the resolver): the access log keeps each request without them.
        if not self.access_log_enabled:
            return
        try:
            line = self.access_line.line(resp, environ, request_time)
        except Exception:
            self.exception("access log: cannot write the line of a request")
            return
        self.access_lines.write(line)


# The access log's redaction, where both servers' tests and callers have found it.
redact = access.redact
SECRET_NAMES = access.SECRET_NAMES


class _ClientSocket(socket.socket):
    """A client's connection whose waits are bounded by `limit` seconds: the request must
    arrive whole within `limit` of its first byte read, and each write must progress within
    `limit`. gunicorn's gthread makes client sockets blocking with no time limit, so one
    client that dribbles its headers (slowloris) or stops reading held a thread for ever."""

    limit: float
    deadline: float | None  # for the request being read; None until its first byte is read

    @classmethod
    def adopt(cls, sock: socket.socket, limit: float) -> _ClientSocket:
        own = cls(sock.family, sock.type, sock.proto, fileno=sock.detach())
        own.limit, own.deadline = limit, None
        return own

    def setblocking(self, flag: bool) -> None:
        # gthread calls this before a thread reads a request (True) and before it hands the
        # connection back to its poller (False).
        if flag:
            self.settimeout(self.limit)
        else:
            super().setblocking(False)

    def recv(self, size: int, flags: int = 0) -> bytes:
        now = time.monotonic()
        if self.deadline is None:
            self.deadline = now + self.limit
        left = self.deadline - now
        if left <= 0:
            return b""
        shorter = left < self.limit  # not on a request's first read: settimeout costs syscalls
        if shorter:
            self.settimeout(left)
        try:
            return super().recv(size, flags)
        except TimeoutError:
            # As if the client had gone: gunicorn closes the connection and logs it at
            # debug level, not as an error with a traceback.
            return b""
        finally:
            if shorter:
                self.settimeout(self.limit)

    def sendall(self, data, flags: int = 0) -> None:
        self.deadline = float("inf")  # the request is in: from here on only stalls count
        try:
            super().sendall(data, flags)
        except TimeoutError:
            raise BrokenPipeError(
                errno.EPIPE, f"the client took over {self.limit} s to read {len(data)} bytes"
            ) from None


# The signals that stop a worker. gunicorn's forked worker keeps the master's handlers until
# its init_signals, and they only queue the signal in the worker's copy of the master's
# queue, which nobody reads: a worker signalled while it booted never stopped (the master
# SIGKILLed it 30 s later, and its Follower meanwhile started an indexer). They are blocked
# across the fork of a worker (runner._before_fork, then unblocked in the master at once and
# in the worker once its handlers are set), so they wait, pending, for the worker's own
# handlers.
STOP_SIGNALS = {signal.SIGTERM, signal.SIGINT, signal.SIGQUIT}


def mount_from_config_only(cfg) -> None:
    """Both servers' mount point comes from their configuration, never from a client's
    SCRIPT_NAME or PATH_INFO header: gunicorn takes those from the peers it trusts, and
    loopback is one by default (a 500, or answers under the client's prefix)."""
    cfg.set("forwarder_headers", "")
    cfg.set("header_map", "drop")


def unblock_stop_signals() -> None:
    signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)


class ClientTimeoutWorker(ThreadWorker):
    """gunicorn's gthread worker whose client connections time out (_ClientSocket); the
    limit is the application's `client_timeout`."""

    def init_signals(self) -> None:
        super().init_signals()
        unblock_stop_signals()  # blocked since the fork (STOP_SIGNALS): delivered now

    def handle_quit(self, sig, frame) -> None:
        # Ctrl-C reaches a worker twice, from the terminal's process group and as the master's
        # SIGQUIT: a second quit re-entered this handler during the first one's exit (a
        # RecursionError, or SystemExit raised inside the interpreter's atexit hooks), each
        # printing a traceback. The first quit is the only one needed. (Setting SIG_IGN
        # instead loses to a signal already pending: Python raises "Signal 3 ignored due to
        # race condition" wherever the worker happens to be.)
        if getattr(self, "_quitting", False):
            return
        self._quitting = True
        super().handle_quit(sig, frame)

    def handle(self, conn):
        if not isinstance(conn.sock, _ClientSocket):
            conn.sock = _ClientSocket.adopt(conn.sock, self.app.client_timeout)
        conn.sock.deadline = None  # a new request
        return super().handle(conn)
