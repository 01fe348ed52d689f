"""The resolver's connections to Archives (issue 24): kept open and reused across
resolutions, and the acknowledgment sent after the redirect has been answered, through a
bounded queue with retries whose drops are counted on /health and in the log.

The Archive is the project's own app on a real loopback socket; a wrapper sees which
connection each request came on and can make its acknowledgments slow or failing."""

from __future__ import annotations

import logging
import socket
import threading
import time

import pytest
import webtest

from archive_service.resolver import archives
from archive_service.resolver.acknowledgments import Acknowledgments
from archive_service.resolver.app import create_resolver_app
from archive_service.resolver.archives import ArchiveClient
from archive_service.resolver.registry import Registry
from archive_service.resolver.resolve import ArchiveRef
from resolver_support import (
    KEY_A,
    LL8,
    RESOLVER_IBI,
    SERVICE_A,
    ThreadedServer,
    archive_app,
    build_collections,
)
from serve_process import Process, free_port, http_get, serve_collection, wait_until

PURL = "/8JMKD3MGP8W/35MMLL8"


class Archive:
    """Archive A's app; records (subject, client port) and misbehaves on acknowledgments as
    told: `ack_delay` seconds before answering, `ack_failures` HTTP 503 answers first."""

    def __init__(self, app):
        self.app = app
        self.seen: list[tuple[str, str]] = []
        self.ack_delay = 0.0
        self.ack_failures = 0
        self.lock = threading.Lock()

    def __call__(self, environ, start_response):
        query = environ.get("QUERY_STRING", "")
        subject = next(
            (p.split("=", 1)[1] for p in query.split("&") if p.startswith("servicesubject=")),
            None,
        )
        if subject:
            with self.lock:
                self.seen.append((subject, environ.get("REMOTE_PORT")))
        if subject == "acknowledgment":
            time.sleep(self.ack_delay)
            with self.lock:
                failing = self.ack_failures > 0
                self.ack_failures -= failing
            if failing:
                start_response("503 Service Unavailable", [("Content-Type", "text/plain")])
                return [b"busy"]
        return self.app(environ, start_response)

    def of(self, subject: str) -> list[str]:
        with self.lock:
            return [port for s, port in self.seen if s == subject]


@pytest.fixture(scope="module")
def archive(tmp_path_factory):
    base = tmp_path_factory.mktemp("archive")
    collection, _ = build_collections(base)
    port = free_port()
    wrapped = Archive(archive_app(collection, port, SERVICE_A, base / "state"))
    server = ThreadedServer(wrapped, port)
    wrapped.address = f"127.0.0.1:{port}"
    yield wrapped
    server.close()


@pytest.fixture(scope="module")
def registered(tmp_path_factory):
    registry = Registry(tmp_path_factory.mktemp("registered"))
    registry.register(SERVICE_A, KEY_A)
    return registry


@pytest.fixture
def resolver_for(tmp_path, registered, archive):
    """A resolver app (WebTest) with A included, made with the given settings."""

    def make(**settings):
        state = tmp_path / f"resolver-{len(list(tmp_path.iterdir()))}"
        state.mkdir()
        (state / registered.path.name).write_bytes(registered.path.read_bytes())
        app = webtest.TestApp(
            create_resolver_app({"state_dir": str(state), "timeout": "2", **settings}),
            extra_environ={"REMOTE_ADDR": "150.163.68.1"},
        )
        include(app, archive.address)
        archive.seen.clear()
        archive.ack_delay, archive.ack_failures = 0.0, 0
        return app

    return make


def include(app, address: str) -> None:
    included = app.get(
        "/" + RESOLVER_IBI,
        {
            "servicesubject": "inclusionRequest",
            "archiveaddress": address,
            "archiveserviceibi": SERVICE_A,
            "archiveip": "127.0.0.1",
            "archiveprotocol": "HTTP",
            "archiveplatformversion": "x",
            "archiveadmemailaddress": "a@b.example",
            "registrationkey": KEY_A,
        },
    )
    assert included.text.endswith("status.confirmation successful")


def acknowledgments(app) -> dict:
    return app.get("/health").json["acknowledgments"]


def connections_to(port: int) -> set[int]:
    """The client ports of TCP connections to `port` on loopback, open or closed within the
    last minute (TIME_WAIT): what the kernel saw, whoever made them."""
    found = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table) as lines:
            next(lines)
            for line in lines:
                local, remote = (int(end.rsplit(":", 1)[1], 16) for end in line.split()[1:3])
                if remote == port:
                    found.add(local)
                elif local == port and remote:
                    found.add(remote)
    return found


@pytest.mark.process
def test_connections_to_an_archive_are_reused(tmp_path, registered):
    """A real `serve` (gunicorn keeps connections alive); 6 resolutions are 6 urlRequests and
    6 acknowledgments: on a new connection each, 12 connections."""
    collection, _ = build_collections(tmp_path)
    archive = serve_collection(tmp_path, collection, tmp_path / "archive-state")
    try:
        archive.wait_answering()
        state = tmp_path / "resolver"
        state.mkdir()
        (state / registered.path.name).write_bytes(registered.path.read_bytes())
        app = webtest.TestApp(create_resolver_app({"state_dir": str(state), "timeout": "2"}))
        include(app, archive.address)
        before = connections_to(archive.port)
        for _ in range(6):
            assert app.get(PURL).location.endswith(f"/col/{LL8}/doc/CCSDS%20650.0-B-1.pdf")
        wait_until(
            lambda: app.get("/health").json["acknowledgments"]["sent"] == 6,
            what="six acknowledgments",
        )
        made = connections_to(archive.port) - before
        # The acknowledgments, sent by up to 4 threads while the next urlRequest is under
        # way, take a kept connection when one is free.
        assert 1 <= len(made) <= 4, made
    finally:
        archive.stop()


def test_a_slow_acknowledgment_does_not_delay_the_redirect(resolver_for, archive):
    app = resolver_for()
    archive.ack_delay = 1.5
    start = time.monotonic()
    assert app.get(PURL).status_int == 302
    assert time.monotonic() - start < 1.0
    wait_until(lambda: archive.of("acknowledgment"), what="the acknowledgment")
    wait_until(lambda: acknowledgments(app)["sent"] == 1, what="the acknowledgment counted")


def test_a_failed_acknowledgment_is_sent_again(resolver_for, archive):
    app = resolver_for()
    archive.ack_failures = 1
    assert app.get(PURL).status_int == 302
    wait_until(lambda: acknowledgments(app)["sent"] == 1, what="the acknowledgment sent")
    assert len(archive.of("acknowledgment")) == 2
    counts = acknowledgments(app)
    assert (counts["retried"], counts["dropped"]) == (1, 0)


def test_an_acknowledgment_that_keeps_failing_is_dropped_and_counted(resolver_for, archive, caplog):
    app = resolver_for()
    archive.ack_failures = 100
    with caplog.at_level(logging.WARNING, logger="archive_service.resolver"):
        assert app.get(PURL).status_int == 302
        wait_until(lambda: acknowledgments(app)["dropped"] == 1, what="the drop counted")
    assert acknowledgments(app)["sent"] == 0
    assert len(archive.of("acknowledgment")) >= 3
    assert any("acknowledgment dropped" in r.getMessage() for r in caplog.records)


def test_a_full_acknowledgment_queue_drops_and_counts(resolver_for, archive):
    app = resolver_for(ack_queue="1")
    archive.ack_delay = 1.0
    for _ in range(8):  # each sender holds one; one more waits in the queue; the rest drop
        assert app.get(PURL).status_int == 302
    counts = acknowledgments(app)
    assert counts["dropped"] >= 1
    wait_until(
        lambda: acknowledgments(app)["sent"] + acknowledgments(app)["dropped"] == 8,
        what="every acknowledgment sent or dropped",
    )


def test_an_archive_trickling_its_answer_costs_a_bounded_time(tmp_path, registered):
    """The one Archive asked alone (from the resolving thread) sends its answer a byte at a
    time, each within the timeout: the round still ends about `timeout` + 0.5 s after it
    began, not when the answer is complete."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    stop = threading.Event()

    def trickle():
        listener.settimeout(0.1)
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except OSError:
                continue
            with conn:
                conn.recv(65536)
                body = b"url http://x.example/a\r\n" * 10
                head = b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(body)
                try:
                    conn.sendall(head)
                    for byte in body:
                        if stop.wait(0.2):
                            return
                        conn.sendall(bytes([byte]))
                except OSError:
                    continue

    thread = threading.Thread(target=trickle, daemon=True)
    thread.start()
    try:
        client = ArchiveClient(0.5)
        archive = ArchiveRef(f"127.0.0.1:{listener.getsockname()[1]}", SERVICE_A)
        start = time.monotonic()
        (answer,) = client.ask_all([archive], {"servicesubject": "urlRequest"})
        took = time.monotonic() - start
        assert answer.error and "not complete within 0.5 s" in answer.error
        assert took < 0.5 + 0.5 + 0.5, took  # the round, and one more piece at most
    finally:
        stop.set()
        thread.join()
        listener.close()


@pytest.mark.process
def test_acknowledgments_queued_at_a_graceful_stop_are_sent(tmp_path, registered, archive):
    """SIGTERM while the senders are busy and one more acknowledgment waits in the queue:
    the worker sends it before it exits (daemon sender threads died with it, the queue lost)."""
    state = tmp_path / "resolver"
    state.mkdir()
    (state / registered.path.name).write_bytes(registered.path.read_bytes())
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    resolver = Process(
        ["resolver", "serve", "--state-dir", str(state), "--bind", f"127.0.0.1:{port}"],
        tmp_path / "resolver.log",
    )
    resolver.start()
    try:
        resolver.wait_answering(url + "/")
        status, _, body = http_get(
            f"{url}/{RESOLVER_IBI}?servicesubject=inclusionRequest&archiveaddress={archive.address}"
            f"&archiveserviceibi={SERVICE_A}&archiveip=127.0.0.1&archiveprotocol=HTTP"
            f"&archiveplatformversion=x&archiveadmemailaddress=a@b.example&registrationkey={KEY_A}"
        )
        assert body.endswith(b"status.confirmation successful"), body
        archive.seen.clear()
        archive.ack_delay, archive.ack_failures = 0.5, 0
        resolutions = Acknowledgments.SENDERS + 1  # each sender holds one, one waits
        for _ in range(resolutions):
            assert http_get(url + PURL)[0] == 302
        wait_until(
            lambda: len(archive.of("acknowledgment")) >= Acknowledgments.SENDERS,
            what="every sender busy",
        )
        assert resolver.stop() == 0
        assert len(archive.of("acknowledgment")) == resolutions
    finally:
        resolver.kill()
        archive.ack_delay = 0.0


def test_a_kept_connection_cut_short_near_a_deadline_waits_the_full_timeout_again(tmp_path):
    """A connection's sends and receives wait on the kernel's timeouts, set once when it is
    made (resolver/archives.py `_wait_at_most`) and cut short as a round's deadline nears:
    its next request, on the same kept connection, waits the whole timeout again."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    connections: list[int] = []

    def answer_slowly_the_second_time():
        conn, peer = listener.accept()
        connections.append(peer[1])
        with conn:
            for delay in (0.0, 0.3):
                conn.recv(65536)
                time.sleep(delay)  # the Archive's slowness itself, not a wait for the test
                body = b"notice {acknowledgment received}"
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))

    thread = threading.Thread(target=answer_slowly_the_second_time, daemon=True)
    thread.start()
    client = ArchiveClient(2.0)
    try:
        archive = ArchiveRef(f"127.0.0.1:{listener.getsockname()[1]}", SERVICE_A)
        assert client.acknowledge(archive, {"servicesubject": "acknowledgment"})
        (kept,) = client._idle[archive.address]
        archives._wait_at_most(kept.sock, 0.05)  # as `_on` does with 0.05 s left
        kept.waits = 0.05
        assert client.acknowledge(archive, {"servicesubject": "acknowledgment"})
        assert len(connections) == 1  # the same connection, kept
    finally:
        client.close()
        thread.join(5)
        listener.close()
