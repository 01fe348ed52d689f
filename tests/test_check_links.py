"""`archive-service check --links` (collection/links.py, issue 21) against a real HTTP server
on loopback: locations that answer, 404, redirect (to a good page and to a missing one), and
one that never answers; relations to items elsewhere through the resolver; at most
`per_host` requests at once to one host."""

from __future__ import annotations

import http.server
import socket
import threading
import time
from pathlib import Path

import pytest

from archive_service.collection import items as index
from archive_service.collection import links
from serve_process import run_command

HELD_ELSEWHERE = "other.example.org/rep/2020/01.01.00.00"
UNKNOWN = "other.example.org/rep/2020/02.02.00.00"


class Site(http.server.ThreadingHTTPServer):
    """A static site: /ok, /gone (404), /moved (301 to /ok), /moved-gone (302 to /gone),
    /hang (never answers), /slow/* (200 after 0.2 s); as a resolver, /<IBI held elsewhere>
    redirects to /ok and any other IBI is 404. It counts requests in flight."""

    daemon_threads = True

    def __init__(self):
        super().__init__(("127.0.0.1", 0), Handler)
        self.release = threading.Event()
        self.lock = threading.Lock()
        self.in_flight = self.most = 0
        self.methods: list[str] = []
        self.thread = threading.Thread(target=self.serve_forever, daemon=True)
        self.thread.start()

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def stop(self) -> None:
        self.release.set()
        self.shutdown()
        self.server_close()


class Handler(http.server.BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def do_GET(self):
        self.answer()

    def do_HEAD(self):
        self.answer()

    def answer(self):
        site: Site = self.server
        with site.lock:
            site.in_flight += 1
            site.most = max(site.most, site.in_flight)
            site.methods.append(self.command)
        counted = True
        try:
            path = self.path
            if path == "/hang":
                site.release.wait(30)
                return
            if path.startswith("/slow/"):
                time.sleep(0.2)
                path = "/ok"
            if path == "/headless" and self.command == "HEAD":
                self.send_response(405)
            elif path in ("/ok", "/headless"):
                self.send_response(200)
            elif path == "/moved":
                self.send_response(301)
                self.send_header("Location", "/ok")
            elif path.startswith("/to?"):
                self.send_response(302)
                self.send_header("Location", path[len("/to?") :])
            elif path == "/moved-gone":
                self.send_response(302)
                self.send_header("Location", "/gone")
            elif path == "/" + HELD_ELSEWHERE:
                self.send_response(302)
                self.send_header("Location", "/ok")
            else:
                self.send_response(404)
            self.send_header("Content-Length", "0")
            # Out of flight before the client can read the answer (end_headers sends it):
            # counted after, the client's next request could be counted beside this one, and
            # `most` read 3 under load for a checker that never asked more than 2 at once.
            with site.lock:
                site.in_flight -= 1
                counted = False
            self.end_headers()
        finally:
            if counted:
                with site.lock:
                    site.in_flight -= 1


@pytest.fixture
def site():
    site = Site()
    yield site
    site.stop()


def item(collection: Path, directory: str, text: str) -> None:
    (collection / directory).mkdir(parents=True)
    (collection / directory / "item.yaml").write_text(text)


@pytest.mark.process
def test_broken_links_are_reported_with_status_and_redirects(tmp_path, site):
    collection = tmp_path / "collection"
    base = site.base
    item(collection, "a.example.org/rep/2020/01.01.00.01", f"location: {base}/ok\n")
    item(collection, "a.example.org/rep/2020/01.01.00.02", f"location: {base}/gone\n")
    item(collection, "a.example.org/rep/2020/01.01.00.03", f"location: {base}/moved\n")
    item(collection, "a.example.org/rep/2020/01.01.00.04", f"location: {base}/moved-gone\n")
    item(collection, "a.example.org/rep/2020/01.01.00.05", f"location: {base}/hang\n")
    item(collection, "a.example.org/rep/2020/01.01.00.06", f"location: {base}/headless\n")
    item(
        collection,
        "a.example.org/rep/2020/01.01.00.07",
        f"nextedition: {HELD_ELSEWHERE}\nmetadata: {UNKNOWN}\n"
        "translations: {en: a.example.org/rep/2020/01.01.00.01}\n",  # held here: not asked
    )
    item(  # a tombstone's links are nobody's concern
        collection, "a.example.org/rep/2020/01.01.00.08", f"state: Deleted\nlocation: {base}/gone\n"
    )
    started = time.monotonic()
    done = run_command(
        ["check", str(collection), "--links", "--links-timeout", "1", "--allow-internal"]
        + ["--resolver", f"{base}/J8LNKB5R7W/3FUQHC5"]
    )
    took = time.monotonic() - started
    assert done.returncode == 1, done.stdout + done.stderr
    broken = sorted(line for line in done.stdout.splitlines() if line.startswith("broken link"))
    assert broken == sorted(
        [
            f"broken link: {base}/{UNKNOWN}: HTTP 404; named by "
            f"a.example.org/rep/2020/01.01.00.07 (metadata {UNKNOWN})",
            f"broken link: {base}/gone: HTTP 404; named by a.example.org/rep/2020/01.01.00.02 "
            "(location)",
            f"broken link: {base}/hang: no answer within 1 s; named by "
            "a.example.org/rep/2020/01.01.00.05 (location)",
            f"broken link: {base}/moved-gone: HTTP 404 after 1 redirect(s): {base}/gone; named "
            "by a.example.org/rep/2020/01.01.00.04 (location)",
        ]
    )
    assert done.stdout.splitlines()[-1] == "8 link(s) leaving the Archive checked, 4 broken"
    assert took < 15, took  # the link that never answers costs its timeout, once


def test_at_most_per_host_requests_at_once(site):
    found = [links.Link(f"{site.base}/slow/{n}", [f"item {n}"]) for n in range(12)]
    started = time.monotonic()
    outcomes = links.Checker(timeout=5, per_host=2, allow_internal=True).check_all(found)
    took = time.monotonic() - started
    assert all(not outcome.broken for _, outcome in outcomes)
    assert site.most == 2
    assert took >= 12 / 2 * 0.2 * 0.9  # six rounds of two


def test_outside_links_are_each_asked_once(tmp_path, site):
    collection = tmp_path / "collection"
    for n in range(3):
        item(collection, f"a.example.org/rep/2020/01.01.00.0{n}", f"location: {site.base}/ok\n")
    catalog = index.scan(collection)
    (link,) = links.outside_links(catalog.by_directory.values(), catalog.lookup, lambda i: None)
    assert len(link.named_by) == 3
    links.Checker(allow_internal=True).check_all([link])
    assert site.methods == ["HEAD"]


class Dribble(http.server.ThreadingHTTPServer):
    """Sends its status line and headers a byte every 0.2 s, for at most 30 s."""

    daemon_threads = True

    def __init__(self):
        super().__init__(("127.0.0.1", 0), DribbleHandler)
        self.thread = threading.Thread(target=self.serve_forever, daemon=True)
        self.thread.start()


class DribbleHandler(http.server.BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def do_HEAD(self):
        head = b"HTTP/1.1 200 OK\r\n" + b"X-Slow: " + b"a" * 150 + b"\r\n\r\n"
        try:
            for byte in head:
                self.wfile.write(bytes([byte]))
                self.wfile.flush()
                time.sleep(0.2)
        except OSError:
            pass  # the checker gave up and hung up: what it should do


def test_a_link_costs_its_timeout_however_slowly_the_headers_come():
    server = Dribble()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/x"
        started = time.monotonic()
        outcome = links.Checker(timeout=1, allow_internal=True).check(url)
        took = time.monotonic() - started
    finally:
        server.shutdown()
        server.server_close()
    assert outcome.error == "no answer within 1 s", outcome
    assert took < 10, took  # each byte within the 1 s per read: 30 s before the deadline


def test_internal_addresses_are_never_contacted(site):
    """Loopback, a name that resolves to it, a redirect to it: named, not asked; the line
    is the same whether something listens there or not (no port scanner)."""
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))
    port = closed.getsockname()[1]
    closed.close()  # nothing listens there: "connection refused" were it asked
    checker = links.Checker(timeout=5)
    listening = checker.check(f"{site.base}/ok")
    refused = checker.check(f"http://127.0.0.1:{port}/ok")
    by_name = checker.check(f"http://localhost:{site.server_address[1]}/ok")
    assert site.methods == []
    for outcome in (listening, refused, by_name):
        assert outcome.broken
        assert "is an internal address (loopback), not contacted" in outcome.error, outcome
    assert listening.error.replace(str(site.server_address[1]), "P") == refused.error.replace(
        str(port), "P"
    )
    assert "localhost (127.0.0.1)" in by_name.error or "localhost (::1)" in by_name.error


@pytest.mark.parametrize(
    "address", ["169.254.169.254", "10.0.0.1", "192.168.1.1", "[::1]", "[::ffff:127.0.0.1]"]
)
def test_other_internal_ranges_are_not_contacted(address):
    outcome = links.Checker(timeout=5).check(f"http://{address}/latest/meta-data/")
    assert "is an internal address" in outcome.error, outcome


@pytest.mark.process
def test_check_links_names_an_internal_location_without_allow_internal(tmp_path, site):
    collection = tmp_path / "collection"
    item(collection, "a.example.org/rep/2020/01.01.00.01", f"location: {site.base}/ok\n")
    done = run_command(["check", str(collection), "--links", "--resolver", "none"])
    assert done.returncode == 1, done.stdout + done.stderr
    assert (
        f"broken link: {site.base}/ok: 127.0.0.1 is an internal address (loopback), not "
        "contacted (allow_internal: no); named by a.example.org/rep/2020/01.01.00.01 (location)"
    ) in done.stdout
    assert site.methods == []


@pytest.mark.process
def test_the_allow_internal_setting_lets_check_links_reach_loopback(tmp_path, site):
    collection = tmp_path / "collection"
    item(collection, "a.example.org/rep/2020/01.01.00.01", f"location: {site.base}/gone\n")
    done = run_command(
        ["check", str(collection), "--links", "--resolver", "none"],
        env={"ARCHIVE_SERVICE_ALLOW_INTERNAL": "yes"},
    )
    assert f"broken link: {site.base}/gone: HTTP 404;" in done.stdout, done.stdout + done.stderr
    assert site.methods == ["HEAD"]
