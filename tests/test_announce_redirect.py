"""The registration key never leaves for a host the Archive was not configured with (issue 15).

A resolver that answers a redirect must not make the announcer repeat the key-bearing request
at the Location: two real loopback servers, the first redirecting to the second, which
records what it got."""

from __future__ import annotations

import logging
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from archive_service.serve import announce, announcer
from archive_service.serve.lifecycle import Lifecycle

KEY = "9876543210-0123456789"


class Recorder:
    """A loopback HTTP server that records request paths and answers `status` with `headers`."""

    def __init__(
        self,
        status: int = 200,
        headers: dict | None = None,
        body: bytes = b"status.archive included\r\nstatus.confirmation successful",
    ):
        recorder = self
        self.paths: list[str] = []

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                recorder.paths.append(self.path)
                self.send_response(status)
                for name, value in (headers or {}).items():
                    self.send_header(name, value.replace("{path}", self.path))
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.base = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture(params=[301, 302, 303, 307, 308])
def redirecting(request):
    third_party = Recorder()
    resolver = Recorder(request.param, {"Location": third_party.base + "{path}"}, b"moved")
    yield resolver, third_party
    resolver.close()
    third_party.close()


def announcement(resolver: str) -> announce.Announcement:
    return announce.Announcement.build(
        resolver + "/J8LNKB5R7W/3FUQHC5",
        archiveaddress="archive.example.org",
        archiveserviceibi="sid.inpe.br/mtc-m18@80/2008/03.17.15.17",
        archiveip="192.0.2.7",
        archiveplatformversion="archive-service-test",
        archiveadmemailaddress="admin@example.org",
        registrationkey=KEY,
    )


def test_a_redirected_inclusion_is_not_followed_and_names_the_location(redirecting):
    resolver, third_party = redirecting
    with pytest.raises(announce.ResolverError) as caught:
        announce.include(announcement(resolver.base), timeout=5)
    assert len(resolver.paths) == 1 and KEY in resolver.paths[0]
    assert third_party.paths == []  # the key never reached the Location
    message = str(caught.value)
    assert "redirect" in message and third_party.base.removeprefix("http://") in message
    assert KEY not in message


def test_a_redirected_exclusion_is_not_followed(redirecting, caplog):
    resolver, third_party = redirecting
    with caplog.at_level(logging.WARNING, logger="archive_service.serve.announce"):
        announce.exclude(announcement(resolver.base), timeout=5)
    assert third_party.paths == []
    assert "redirect" in caplog.text and KEY not in caplog.text


@pytest.mark.parametrize(
    "resolver, warns",
    [
        ("http://urlib.net/J8LNKB5R7W/3FUQHC5", True),
        ("http://resolver.example.org:8090/J8LNKB5R7W/3FUQHC5", True),
        ("https://urlib.net/J8LNKB5R7W/3FUQHC5", False),
        ("http://127.0.0.1:8090/J8LNKB5R7W/3FUQHC5", False),
        ("http://[::1]:8090/J8LNKB5R7W/3FUQHC5", False),
        ("http://localhost:8090/J8LNKB5R7W/3FUQHC5", False),
    ],
)
def test_a_plain_http_resolver_elsewhere_is_warned_about(resolver, warns):
    warning = announce.transport_warning(announce.Announcement(resolver, ()))
    assert bool(warning) is warns
    if warns:
        assert "https://" in warning and "registrationkey" in warning


@pytest.mark.process
def test_the_plain_http_warning_is_logged_when_serve_starts(caplog):
    lifecycle = Lifecycle(announcement("http://resolver.example.org"))
    try:
        with caplog.at_level(logging.WARNING, logger="archive_service.serve.announce"):
            lifecycle.start(announcer.Local("127.0.0.1", 1))  # nothing answers: it only waits
    finally:
        lifecycle.stop_announcer()
    assert "https://" in caplog.text
