"""How the resolver reads an Archive's answer off the wire (resolver/http_answer.py: httptools'
parser and the connections kept per Archive), against a scripted Archive on a real loopback
socket that answers as other servers on the Internet do: closing a kept connection just as
it is reused, framing by chunks or by closing, a 1xx first, too much, or not HTTP."""

from __future__ import annotations

import os
import resource
import socket
import threading
import time
from collections.abc import Callable

import pytest

from archive_service.resolver import archives, http_answer
from archive_service.resolver.archives import ArchiveClient, ArchiveError
from archive_service.resolver.resolve import ArchiveRef
from resolver_support import SERVICE_A

PAIRS = b"url http://x.example/a.pdf\r\nstate Original"
ASK = {"servicesubject": "urlRequest", "parsedibiurl.ibi": "8JMKD3MGP8W/35MMLL8"}


def answer(body: bytes = PAIRS, *headers: str) -> bytes:
    head = ["HTTP/1.1 200 OK", "Content-Type: text/plain", *headers]
    if not any(h.lower().startswith(("content-length", "transfer-encoding")) for h in headers):
        head.append(f"Content-Length: {len(body)}")
    return ("\r\n".join(head) + "\r\n\r\n").encode() + body


class Scripted:
    """An Archive whose every answer is `script(connection number, request number on that
    connection)`: bytes to send, then ("close") or not the connection; None: close without
    answering. Records each request as (connection number, request bytes)."""

    def __init__(self, script: Callable[[int, int], tuple[bytes | None, bool]]):
        self.script = script
        self.requests: list[tuple[int, bytes]] = []
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.address = f"127.0.0.1:{self.listener.getsockname()[1]}"
        self.connections = 0
        self.threads: list[threading.Thread] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            number = self.connections
            self.connections += 1
            thread = threading.Thread(target=self._serve, args=(conn, number), daemon=True)
            self.threads.append(thread)
            thread.start()

    def _serve(self, conn: socket.socket, number: int) -> None:
        with conn:
            pending, asked = b"", 0
            while True:
                while b"\r\n\r\n" not in pending:
                    data = conn.recv(65536)
                    if not data:
                        return
                    pending += data
                request, pending = pending.split(b"\r\n\r\n", 1)
                self.requests.append((number, request))
                reply, close = self.script(number, asked)
                asked += 1
                if reply is None:
                    return
                conn.sendall(reply)
                if close:
                    return

    def close(self) -> None:
        self.listener.close()


@pytest.fixture
def scripted():
    made: list[Scripted] = []

    def make(script) -> tuple[Scripted, ArchiveRef]:
        server = Scripted(script)
        made.append(server)
        return server, ArchiveRef(server.address, SERVICE_A)

    yield make
    for server in made:
        server.close()


@pytest.fixture
def clients():
    """An ArchiveClient (timeout 2 s), its kept connections closed after the test."""
    made: list[ArchiveClient] = []

    def make(**kw) -> ArchiveClient:
        made.append(ArchiveClient(2, **kw))
        return made[-1]

    yield make
    for one in made:
        one.close()


def test_a_kept_connection_closed_as_it_is_reused_is_asked_again_on_a_new_one(scripted, clients):
    """The Archive's keep-alive ends just as the second request arrives: it reads it and
    closes without a byte of answer (what a server does when its idle timeout and the request
    cross). A browser sends the request again; so does the resolver, instead of reporting
    the Archive silent."""
    server, archive = scripted(lambda conn, n: (None, True) if n == 1 else (answer(), False))
    client = clients()
    assert client.get(archive, ASK) == [("url", "http://x.example/a.pdf"), ("state", "Original")]
    assert client.get(archive, ASK)[0] == ("url", "http://x.example/a.pdf")
    assert [conn for conn, _ in server.requests] == [0, 0, 1]


def test_a_kept_connection_is_reused(scripted, clients):
    server, archive = scripted(lambda conn, n: (answer(), False))
    client = clients()
    for _ in range(5):
        client.get(archive, ASK)
    assert server.connections == 1


def test_an_answer_in_chunks_is_read_and_its_connection_kept(scripted, clients):
    chunked = b"%x\r\n%s\r\n0\r\n\r\n" % (len(PAIRS), PAIRS)
    reply = answer(chunked, "Transfer-Encoding: chunked")
    server, archive = scripted(lambda conn, n: (reply, False))
    client = clients()
    assert client.get(archive, ASK)[1] == ("state", "Original")
    assert client.get(archive, ASK)[1] == ("state", "Original")
    assert server.connections == 1


def test_an_answer_that_ends_where_the_connection_does_is_read(scripted, clients):
    """HTTP/1.0 style: no length, the end of the data is the end of the answer."""
    server, archive = scripted(
        lambda conn, n: (b"HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\n\r\n" + PAIRS, True)
    )
    client = clients()
    assert client.get(archive, ASK)[0] == ("url", "http://x.example/a.pdf")
    assert client.get(archive, ASK)[0] == ("url", "http://x.example/a.pdf")
    assert server.connections == 2


def test_an_answer_after_100_continue_is_the_answer(scripted, clients):
    _, archive = scripted(lambda conn, n: (b"HTTP/1.1 100 Continue\r\n\r\n" + answer(), False))
    assert clients().get(archive, ASK)[0] == ("url", "http://x.example/a.pdf")


def test_bytes_after_the_answer_are_not_taken_for_the_next_one(scripted, clients):
    """An Archive that sends two answers to one request: the second must not be read as the
    answer to the next request on that connection."""
    stray = answer(b"url http://evil.example/")
    server, archive = scripted(lambda conn, n: (answer() + stray, False))
    client = clients()
    assert client.get(archive, ASK)[0] == ("url", "http://x.example/a.pdf")
    assert client.get(archive, ASK)[0] == ("url", "http://x.example/a.pdf")
    assert server.connections == 2


def test_headers_without_end_are_refused_at_a_bound(scripted, clients):
    pad = b"X-Pad: " + b"a" * 1000 + b"\r\n"
    _, archive = scripted(lambda conn, n: (b"HTTP/1.1 200 OK\r\n" + pad * 100, True))
    with pytest.raises(ArchiveError, match="headers longer than"):
        clients().get(archive, ASK)


def test_an_answer_longer_than_the_bound_is_refused(scripted, clients):
    big = b"x" * (http_answer.MAX_ANSWER + 10)
    _, archive = scripted(lambda conn, n: (answer(big), True))
    with pytest.raises(ArchiveError, match="answer longer than"):
        clients().get(archive, ASK)


def test_an_answer_of_too_many_pairs_is_refused_and_its_archive_set_aside(scripted, clients):
    """A hostile Archive's valid list of a million tiny pairs cost the resolver 0.47 s of CPU
    per answer: an answer has at most MAX_PAIRS pairs, and its Archive is asked last."""
    many = b" ".join([b"a b"] * (archives.MAX_PAIRS + 1))
    _, archive = scripted(lambda conn, n: (answer(many), False))
    client = clients()
    with pytest.raises(ArchiveError, match=f"more than {archives.MAX_PAIRS} pairs"):
        client.get(archive, ASK)
    assert client._quiet.get(archive.address, 0) > time.monotonic()


def test_an_answer_that_is_not_http_is_reported(scripted, clients):
    _, archive = scripted(lambda conn, n: (b"url http://x.example/\r\n\r\n" + PAIRS, True))
    with pytest.raises(ArchiveError, match="not HTTP"):
        clients().get(archive, ASK)


def test_an_answer_cut_short_is_reported(scripted, clients):
    _, archive = scripted(lambda conn, n: (answer()[:-5], True))
    with pytest.raises(ArchiveError, match="closed the connection"):
        clients().get(archive, ASK)


def test_a_control_character_in_a_header_is_never_sent(scripted, clients):
    """The Via header continues the user's request's; a line break in it would let the user
    write headers, or a second request, to the Archive."""
    server, archive = scripted(lambda conn, n: (answer(), False))
    with pytest.raises(ArchiveError, match="control character"):
        clients().get(archive, ASK, via="1.1 x\r\nX-Injected: 1")
    time.sleep(0.1)
    assert server.requests == []


def test_requests_carry_host_user_agent_and_via(scripted, clients):
    server, archive = scripted(lambda conn, n: (answer(), False))
    client = clients(pseudonym="archive-service-resolver-test")
    client.get(archive, ASK, via="1.1 proxy")
    ((_, request),) = server.requests
    lines = request.decode().split("\r\n")
    assert lines[0].startswith(f"GET /{SERVICE_A}?servicesubject=urlRequest&")
    assert lines[0].endswith(" HTTP/1.1")
    assert f"Host: {server.address}" in lines
    assert "Via: 1.1 proxy, 1.1 archive-service-resolver-test" in lines
    assert any(line.startswith("User-Agent: archive-service-resolver/") for line in lines)


@pytest.mark.parametrize("stream", ["continues", "trickle"])
def test_an_answer_that_never_ends_is_given_up_even_outside_a_round(clients, stream):
    """An acknowledgment or an inclusion's confirmation is asked outside a round: an Archive
    that answers `100 Continue` for ever, or trickles its headers a byte at a time, each piece
    within the timeout, held the asking thread for ever (an acknowledgment sender, or a
    request thread of the resolver answering an inclusion)."""
    if stream == "continues":
        piece, first = b"HTTP/1.1 100 Continue\r\n\r\n", b""
    else:
        piece, first = b"a", b"HTTP/1.1 200 OK\r\nX-Slow: "
    listener = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()

    def endless() -> None:
        conn, _ = listener.accept()
        with conn:
            conn.recv(65536)
            conn.sendall(first)
            while not stop.wait(0.1):
                try:
                    conn.sendall(piece)
                except OSError:
                    return

    threading.Thread(target=endless, daemon=True).start()
    client = clients()
    client.timeout = 0.5
    archive = ArchiveRef(f"127.0.0.1:{listener.getsockname()[1]}", SERVICE_A)
    started = time.monotonic()
    try:
        with pytest.raises(ArchiveError, match="not complete within"):
            client.acknowledge(archive, ASK)
    finally:
        stop.set()
        listener.close()
    assert time.monotonic() - started < 0.5 + 0.5 + 0.5


def test_a_switch_of_protocols_is_an_archive_error(scripted, clients):
    """httptools reports an upgrade (101 with Upgrade) by HttpParserUpgrade, which is not an
    HttpParserError: it left `get` as is, so a round of one Archive (the one remembered for
    the IBI) ended the user's request in a 500, and an inclusion's confirmation too."""
    reply = b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n"
    _, archive = scripted(lambda conn, n: (reply, True))
    client = clients()
    (answered,) = client.ask_all([archive], ASK)
    assert answered.error
    assert client.confirm(archive) is False


@pytest.mark.parametrize(
    "stray",
    [b"GARBAGE", b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: x\r\nConnection: upgrade\r\n\r\n"],
    ids=["not HTTP", "an upgrade"],
)
def test_bytes_after_a_complete_answer_do_not_lose_it(scripted, clients, stray):
    """What follows a complete answer only ends the connection (as a second answer does):
    the parser's complaint about it threw the answer away."""
    server, archive = scripted(lambda conn, n: (answer() + stray, False))
    client = clients()
    assert client.get(archive, ASK)[0] == ("url", "http://x.example/a.pdf")
    assert client.get(archive, ASK)[0] == ("url", "http://x.example/a.pdf")
    assert server.connections == 2


def flood(first: bytes) -> tuple[socket.socket, ArchiveRef]:
    """An Archive that answers `first`, then `a` as fast as it is read, for ever."""
    listener = socket.create_server(("127.0.0.1", 0))

    def serve() -> None:
        conn, _ = listener.accept()
        with conn:
            conn.recv(65536)
            try:
                conn.sendall(first)
                while True:
                    conn.sendall(b"a" * 65536)
            except OSError:
                return

    threading.Thread(target=serve, daemon=True).start()
    return listener, ArchiveRef(f"127.0.0.1:{listener.getsockname()[1]}", SERVICE_A)


@pytest.mark.parametrize(
    "first, refused",
    [
        (b"HTTP/1.1 200 OK\r\nX-Long: ", "headers longer than"),
        (b"HTTP/1.1 200 ", "headers longer than"),
        (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1;x=", "answer longer than"),
        (
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n%x\r\n%s\r\n0\r\nX: "
            % (len(PAIRS), PAIRS),
            "answer longer than",
        ),
    ],
    ids=["a header's value", "the status line", "a chunk's extension", "a trailer"],
)
def test_an_endless_line_is_refused_at_a_bound(clients, first, refused):
    """httptools hands over a header only once it has all of it, gathered in one growing
    bytes object (copied at every piece): the bound on headers counted complete ones only,
    so a single endless header (or trailer) took memory and CPU until the deadline, tens of
    MB per Archive asked; a status line or a chunk's extension, CPU."""
    listener, archive = flood(first)
    client = clients()
    started = time.monotonic()
    try:
        with pytest.raises(ArchiveError, match=refused):
            client.get(archive, ASK)
    finally:
        listener.close()
    assert time.monotonic() - started < 1


def test_a_kept_connection_above_fd_1024_is_reused(scripted, clients):
    """select() takes no file descriptor from FD_SETSIZE (1024) on: asking it whether a kept
    connection was dropped raised, which read as dropped, so in a worker with a thousand
    files and sockets open no connection was ever reused (a new TCP connection each time)."""
    if resource.getrlimit(resource.RLIMIT_NOFILE)[0] < 1300:
        pytest.skip("the file descriptor limit is below 1300")
    server, archive = scripted(lambda conn, n: (answer(), False))
    # The lowest free descriptors taken, as a busy worker's files and sockets would.
    held = [os.open(os.devnull, os.O_RDONLY) for _ in range(1100)]
    try:
        client = clients()
        for _ in range(3):
            assert client.get(archive, ASK)[0] == ("url", "http://x.example/a.pdf")
        assert min(kept.sock.fileno() for kept in client._idle[archive.address]) > 1024
    finally:
        for fd in held:
            os.close(fd)
    assert server.connections == 1


@pytest.mark.parametrize("stall", ["trickle", "blackholed addresses"])
def test_the_deadline_is_a_total_one(clients, monkeypatch, stall):
    """An answer's deadline (timeout + 0.5 s) held a thread up to `timeout` longer when a
    piece was waited for just before it, and not at all while connecting: each of the
    addresses a name has was tried for the full timeout (an Archive's name with sixteen
    unreachable ones held a thread of the shared pool for sixteen timeouts, long after the
    round had reported it silent)."""
    client = clients()
    client.timeout = 1.0  # the deadline at 1.5 s
    listener = socket.create_server(("127.0.0.1", 0), backlog=0)
    port = listener.getsockname()[1]
    stop = threading.Event()
    if stall == "trickle":  # a piece every 0.95 s: each within the timeout, the 2nd at 1.9 s

        def trickle() -> None:
            conn, _ = listener.accept()
            with conn:
                conn.recv(65536)
                conn.sendall(b"HTTP/1.1 200 OK\r\nX-Slow: ")
                while not stop.wait(0.95):
                    try:
                        conn.sendall(b"a")
                    except OSError:
                        return

        threading.Thread(target=trickle, daemon=True).start()
        archive = ArchiveRef(f"127.0.0.1:{port}", SERVICE_A)
    else:  # a listener whose queue is full answers no SYN: a host that does not answer
        filler = socket.create_connection(("127.0.0.1", port))
        resolve = socket.getaddrinfo
        monkeypatch.setattr(
            socket,
            "getaddrinfo",
            lambda host, *a, **kw: (
                resolve("127.0.0.1", *a, **kw) * 4
                if host == "blackholed.test"
                else resolve(host, *a, **kw)
            ),
        )
        archive = ArchiveRef(f"blackholed.test:{port}", SERVICE_A)
    started = time.monotonic()
    try:
        with pytest.raises(ArchiveError):
            client.acknowledge(archive, ASK)
    finally:
        stop.set()
        listener.close()
        if stall != "trickle":
            filler.close()
    # Before: 1.9 s (the trickle's second piece), 4 s (four addresses, 1 s each).
    assert time.monotonic() - started < 1.5 + 0.3
