"""A hostile or broken resolver against the announcer's client side: a scripted resolver on a
real loopback socket answers what no resolver should (a trickle, an echo of the request).
The announcer must give up within its timeout and never show any part of the key."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable

import pytest

from archive_service.serve import announce
from resolver_double import KEY, loopback_announcement


class Scripted:
    """A loopback TCP server that reads each request's head and runs `script(conn, head)`."""

    def __init__(self, script: Callable[[socket.socket, bytes], None]):
        self.script = script
        self.heads: list[bytes] = []
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}/J8LNKB5R7W/3FUQHC5"
        self.stopped = threading.Event()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._one, args=(conn,), daemon=True).start()

    def _one(self, conn: socket.socket) -> None:
        with conn:
            conn.settimeout(5)
            head = b""
            try:
                while b"\r\n\r\n" not in head and (piece := conn.recv(4096)):
                    head += piece
                self.heads.append(head)
                self.script(conn, head)
            except OSError:
                pass

    def close(self) -> None:
        self.stopped.set()
        self.sock.close()


@pytest.fixture
def scripted():
    servers: list[Scripted] = []

    def start(script) -> Scripted:
        servers.append(Scripted(script))
        return servers[-1]

    yield start
    for server in servers:
        server.close()


def trickling(head: bytes) -> Callable[[socket.socket, bytes], None]:
    """Send `head`, then a byte every 0.2 s for as long as the test runs (each well within
    the read timeout), as a resolver, a proxy or a captive portal that never finishes."""

    def script(conn: socket.socket, request: bytes) -> None:
        conn.sendall(head)
        for _ in range(300):
            time.sleep(0.2)
            conn.sendall(b" " if head.endswith(b"included") else b"b")

    return script


@pytest.mark.parametrize(
    "head",
    [b"HTTP/1.1 200 OK\r\nX-A: ", b"HTTP/1.0 200 OK\r\n\r\nstatus.archive included"],
    ids=["headers", "body"],
)
def test_a_trickling_resolver_is_given_up_within_the_timeout(scripted, head):
    """http.client's timeout is per read: a byte every 0.2 s held the inclusion (and the
    announcer, which then never retried nor saw its master go) for as long as it came."""
    resolver = scripted(trickling(head))
    started = time.monotonic()
    with pytest.raises(announce.ResolverError, match="within 1 s") as error:
        announce.include(loopback_announcement(resolver.url), timeout=1)
    assert time.monotonic() - started < 4
    assert KEY not in str(error.value)


def test_an_error_page_echoing_the_request_shows_no_digit_of_the_key(scripted):
    """The body is shown cut at 200 characters: cut inside an echoed key, the digits before
    the cut were logged and recorded for /health and the overview page."""

    def echo(conn: socket.socket, head: bytes) -> None:
        line = head.split(b"\r\n")[0]
        start = line.index(b"registrationkey=") + len(b"registrationkey=")
        body = line[start - 194 :]  # the key begins 6 characters before the cut
        conn.sendall(b"HTTP/1.1 404 Not Found\r\nContent-Length: %d\r\n\r\n" % len(body) + body)

    resolver = scripted(echo)
    with pytest.raises(announce.ResolverError, match="HTTP 404") as error:
        announce.include(loopback_announcement(resolver.url), timeout=5)
    assert KEY[:6] not in str(error.value)
    assert "registrationkey=<secret>" in str(error.value)


@pytest.mark.parametrize(
    "answer",
    [
        b"HTTP/1.1 503 Busy\r\nContent-Length: 100\r\n\r\nbu",  # then nothing: the read times out
        b"HTTP/1.1 503 Busy\r\nTransfer-Encoding: chunked\r\n\r\n10\r\nbu",  # cut mid-chunk
    ],
    ids=["stalled", "cut"],
)
def test_an_error_whose_body_stalls_or_is_cut_is_a_resolver_error(scripted, answer):
    """Its body was read inside the `except HTTPError` clause: the TimeoutError or
    IncompleteRead escaped `ask`, past the announcer's retry loop (which catches
    ResolverError): the announcer died and the Archive was never included until a restart."""

    def script(conn: socket.socket, head: bytes) -> None:
        conn.sendall(answer)
        if b"chunked" not in answer:
            time.sleep(3)

    resolver = scripted(script)
    with pytest.raises(announce.ResolverError, match="HTTP 503 Busy") as error:
        announce.include(loopback_announcement(resolver.url), timeout=1)
    assert "could not be read" in str(error.value) and KEY not in str(error.value)


def test_the_status_lines_reason_reaches_the_log_printable_and_short(scripted):
    """The reason phrase is the resolver's own text, up to http.client's 64 KiB line: it went
    whole and raw into each retry's log line and inclusion.json's detail, terminal escapes
    and all."""
    reason = b"\x1b]0;owned\x07\x1b[2J" + b"busy " * 10_000

    def script(conn: socket.socket, head: bytes) -> None:
        conn.sendall(b"HTTP/1.1 503 " + reason + b"\r\nContent-Length: 0\r\n\r\n")

    resolver = scripted(script)
    with pytest.raises(announce.ResolverError, match="HTTP 503") as error:
        announce.include(loopback_announcement(resolver.url), timeout=5)
    text = str(error.value)
    assert text.isprintable() and "\\x1b]0;owned\\x07" in text
    assert len(text) < 1000
