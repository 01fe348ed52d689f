"""The resolver's web surface against a hostile included Archive and hostile users: an Archive
is trusted to name its own items, nothing more. The hostile Archive is a plain WSGI function
on a loopback socket answering whatever the test scripts; the honest one is this project's
Archive app; the resolver is its WSGI app under WebTest."""

from __future__ import annotations

import time
from pathlib import Path
from urllib.parse import parse_qsl

import pytest
import webtest

from archive_service.resolver.app import create_resolver_app
from archive_service.resolver.registry import Registry
from resolver_support import (
    BANON,
    KEY_A,
    LL8,
    RESOLVER_IBI,
    SERVICE_A,
    ThreadedServer,
    archive_app,
    build_collections,
)
from serve_process import free_port

SERVICE = "/" + RESOLVER_IBI
FORGED = (
    b"down\n2026-01-01 00:00:00,000 [1] INFO archive_service.resolver.registry: included x\x1b[2J"
)
HOSTILE = "evil.example/rep/2020/01.01.00.00"
HOSTILE_KEY = "1111111111"


class Hostile:
    """An included Archive that confirms its inclusion, thanks for acknowledgments and
    answers every urlRequest with `body`."""

    def __init__(self):
        self.body = b""
        self.status = "200 OK"  # of its answers to urlRequests
        self.ack = b"notice {acknowledgment received}"
        self.asked: list[dict] = []
        port = free_port()
        self.server = ThreadedServer(self.answer, port)
        self.address = f"127.0.0.1:{port}"

    def answer(self, environ, start_response):
        query = dict(parse_qsl(environ.get("QUERY_STRING", "")))
        self.asked.append(query)
        body = {
            "inclusionConfirmationRequest": b"confirmation yes",
            "acknowledgment": self.ack,
        }.get(query.get("servicesubject"), self.body)
        status = self.status if query.get("servicesubject") == "urlRequest" else "200 OK"
        start_response(status, [("Content-Type", "text/plain"), ("Content-Length", str(len(body)))])
        return [body]

    def close(self) -> None:
        self.server.close()


@pytest.fixture(scope="module")
def bed(tmp_path_factory):
    """The hostile Archive, the project's Archive A (the sample collection), and a registry
    with both registered (scrypt once)."""
    base = tmp_path_factory.mktemp("hostile")
    a, _ = build_collections(base)
    port = free_port()
    honest = ThreadedServer(archive_app(a, port, SERVICE_A, base / "state-a"), port)
    hostile = Hostile()
    registry = Registry(base / "registered")
    registry.register(HOSTILE, HOSTILE_KEY)
    registry.register(SERVICE_A, KEY_A)
    yield {
        "hostile": hostile,
        "a": f"127.0.0.1:{port}",
        "a_collection": a,
        "registry": registry.path,
    }
    hostile.close()
    honest.close()


def resolver_with(tmp_path: Path, bed, *included: str):
    state = tmp_path / "resolver"
    state.mkdir()
    (state / bed["registry"].name).write_bytes(bed["registry"].read_bytes())
    app = webtest.TestApp(
        create_resolver_app({"state_dir": str(state), "timeout": "2", "address": "r.example"}),
        extra_environ={"REMOTE_ADDR": "150.163.68.1"},
    )
    for name in included:
        include(app, bed, name)
    return app


def include(app, bed, name: str) -> None:
    address, service, key = {
        "hostile": (bed["hostile"].address, HOSTILE, HOSTILE_KEY),
        "a": (bed["a"], SERVICE_A, KEY_A),
    }[name]
    announcement = {
        "servicesubject": "inclusionRequest",
        "archiveaddress": address,
        "archiveserviceibi": service,
        "archiveip": "127.0.0.1",
        "archiveprotocol": "HTTP",
        "archiveplatformversion": "1",
        "archiveadmemailaddress": "admin@archive.example",
        "registrationkey": key,
    }
    assert app.get(SERVICE, announcement).text.endswith("successful")


BAD_URLS = [
    "javascript:alert(document.domain)",
    "data:text/html,<script>alert(1)</script>",
    "file:///etc/passwd",
    "//evil.example/x",  # scheme-relative
    "/8JMKD3MGP8W/35MMLL8",  # relative: this resolver again, for ever
    "http:evil.example",
    "http://bank.example@evil.example/",  # credentials: a host that reads as another
    "{http://a.example/x y}",  # a list of words, not a URL
    "{}",
    "http://a.example/" + "x" * 10_000,  # a Location no proxy or browser takes
]


@pytest.mark.parametrize("url", BAD_URLS)
def test_an_archive_url_that_is_not_an_absolute_http_url_never_reaches_the_user(tmp_path, bed, url):
    """Table 6.11: `url` is an absolute URI of scheme http. Anything else went straight to the
    Location header and to the redirect page's link (a javascript: link on the resolver's
    own origin)."""
    bed["hostile"].body = f"url {url}\r\nstate Original".encode()
    resolver = resolver_with(tmp_path, bed, "hostile")
    page = resolver.get("/8JMKD3MGP8W/35MMLL8", status=404)
    assert "Location" not in page.headers
    assert "no Archive gives a URL for 8JMKD3MGP8W/35MMLL8" in page.text
    assert "javascript:" not in page.text and "data:" not in page.text


def test_the_honest_answer_wins_over_an_unusable_url(tmp_path, bed):
    bed["hostile"].body = b"url javascript:alert(1)\r\nstate Original"
    resolver = resolver_with(tmp_path, bed, "hostile", "a")
    response = resolver.get("/8JMKD3MGP8W/35MMLL8", status=302)
    assert response.location == f"http://{bed['a']}/col/{LL8}/doc/CCSDS%20650.0-B-1.pdf"


def test_many_unusable_urls_in_one_answer_are_one_log_line(tmp_path, bed, caplog):
    """Each `url…` value dropped was a WARNING of its own: an included Archive answering
    every urlRequest with 2,040 of them (23 KB, within the pairs' bound) wrote 400 KB of log
    per resolution, the good Archive's IBIs' too, and took their p50 from 11 to 125 ms
    (the tenth adversarial pass). One line an answer says how many, and the first."""
    bad = [f"url.{i} a" for i in range(500)]
    bed["hostile"].body = "\r\n".join(["state Original", *bad]).encode()
    resolver = resolver_with(tmp_path, bed, "hostile")
    with caplog.at_level("WARNING", logger="archive_service.resolver.resolve"):
        resolver.get("/8JMKD3MGP8W/35MMLL8", status=404)
    (line,) = [r.getMessage() for r in caplog.records if "ignored" in r.getMessage()]
    assert "url.0 a ignored: not an absolute http or https URL" in line
    assert "499 more ignored" in line


def test_an_archive_error_page_cannot_write_lines_of_the_log(tmp_path, bed, caplog):
    """An included Archive's error page is quoted in the log line of its refusal: its line
    breaks wrote lines of their own (a forged `included …`, a terminal's escapes)."""
    bed["hostile"].status, bed["hostile"].body = "503 Service Unavailable", FORGED
    try:
        resolver = resolver_with(tmp_path, bed, "hostile")
        with caplog.at_level("WARNING", logger="archive_service.resolver.archives"):
            resolver.get("/8JMKD3MGP8W/35MMLL8", status=502)
    finally:
        bed["hostile"].status = "200 OK"
    (line,) = [r.getMessage() for r in caplog.records if "HTTP 503" in r.getMessage()]
    assert "\n" not in line and "\x1b" not in line
    assert "down\\n" in line


def test_an_archive_answering_an_acknowledgment_with_64_kib_is_one_short_line(
    tmp_path, bed, caplog
):
    """An acknowledgment's unexpected answer was logged whole (its pairs' repr): an included
    Archive answering each with 2,040 pairs wrote ~70 KB of log per reader sent to it."""
    bed["hostile"].body = b"url http://evil.example/x\r\nstate Original"
    bed["hostile"].ack = "\r\n".join(f"p{i} {'v' * 20}" for i in range(2040)).encode()
    try:
        resolver = resolver_with(tmp_path, bed, "hostile")
        with caplog.at_level("WARNING", logger="archive_service.resolver.archives"):
            resolver.get("/8JMKD3MGP8W/35MMLL8", status=302)
            deadline = time.monotonic() + 5
            while not [r for r in caplog.records if "unexpected answer" in r.getMessage()]:
                assert time.monotonic() < deadline, "the acknowledgment was never answered"
                time.sleep(0.02)
    finally:
        bed["hostile"].ack = b"notice {acknowledgment received}"
    (line,) = [r.getMessage() for r in caplog.records if "unexpected answer" in r.getMessage()]
    assert "('p0', 'vvvv" in line and len(line) < 1000


@pytest.mark.parametrize(
    "url", ["https://a.example/x.pdf", "http://a.example:8080/b?c=d&e=f", "http://[::1]:81/x"]
)
def test_http_and_https_urls_are_taken(tmp_path, bed, url):
    bed["hostile"].body = f"url {url}\r\nstate Original".encode()
    resolver = resolver_with(tmp_path, bed, "hostile")
    assert resolver.get("/8JMKD3MGP8W/35MMLL8", status=302).location == url


def test_a_file_path_that_is_not_utf8_gets_its_alert_not_a_500(tmp_path, bed):
    """File names are bytes (a Latin-1 name is Relat%f3rio.pdf): the alert that no Archive
    has the file named them as a Python string with surrogates, which the page could not
    encode."""
    bed["hostile"].body = b"ibi 8JMKD3MGP8W/35MMLL8\r\nstate Original"  # no such file
    resolver = resolver_with(tmp_path, bed, "hostile")
    page = resolver.get("/8JMKD3MGP8W/35MMLL8/Relat%f3rio.pdf", status=404)
    assert "no Archive gives a URL for 8JMKD3MGP8W/35MMLL8 and file /Relat" in page.text
    assert page.content_type == "text/html"


@pytest.fixture
def slow_a(bed, tmp_path):
    """Archive A again, answering each request 0.3 s late: far slower than the hostile one."""
    port = free_port()
    app = archive_app(Path(bed["a_collection"]), port, SERVICE_A, tmp_path / "state-slow")

    def late(environ, start_response):
        time.sleep(0.3)
        return app(environ, start_response)

    server = ThreadedServer(late, port)
    yield f"127.0.0.1:{port}", server
    server.close()


def test_the_naming_authority_is_waited_for_and_its_claim_wins(tmp_path, bed, slow_a):
    """The hostile Archive answers every IBI at once, claiming the Original: the round had
    settled long before A (whose service IBI names sid.inpe.br/mtc-m18@80/…) answered."""
    slow_a, _ = slow_a
    bed["hostile"].body = b"url http://evil.example/phish\r\nstate Original"
    resolver = resolver_with(tmp_path, {**bed, "a": slow_a}, "hostile", "a")
    response = resolver.get(f"/{LL8}", status=302)
    assert response.location.endswith(f"/col/{LL8}/doc/CCSDS%20650.0-B-1.pdf")
    conflicts = resolver.get("/health").json["conflicts"]
    assert conflicts["refused"] == 1
    (conflict,) = conflicts["latest"]
    assert conflict["refused"] == f"{bed['hostile'].address} (service {HOSTILE})"
    assert conflict["kept"] == f"{slow_a} (service {SERVICE_A})"
    assert "Conflicting claims" in resolver.get("/").text


def test_a_remembered_claimant_that_falls_silent_is_not_displaced(tmp_path, bed, slow_a):
    """BANON (iconet.com.br/banon/…) is named by neither Archive: A, its first claimant, is
    remembered; once A stops answering, the hostile Archive's claim is refused, not taken."""
    address, server = slow_a
    bed["hostile"].body = b"url http://evil.example/phish\r\nstate Original"
    resolver = resolver_with(tmp_path, {**bed, "a": address}, "a")
    assert resolver.get(f"/{BANON}", status=302).location.startswith(f"http://{address}/")
    include(resolver, bed, "hostile")
    server.close()
    page = resolver.get(f"/{BANON}", status=404)
    assert "evil.example" not in page.headers.get("Location", "") + page.text
    (conflict,) = resolver.get("/health").json["conflicts"]["latest"]
    assert conflict["kept"] == f"{address} (service {SERVICE_A})"
    assert conflict["refused"] == f"{bed['hostile'].address} (service {HOSTILE})"
