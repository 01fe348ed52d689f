"""The resolver's WSGI app (WebTest) against real Archive apps on loopback sockets: the
registry's inclusion and exclusion (§5.2), resolution over HTTP, acknowledgments, alerts,
and Archives that do not answer."""

from __future__ import annotations

import ipaddress
import logging
import shutil
import socket
import threading
from pathlib import Path
from urllib.parse import parse_qsl

import pytest
import webtest

from archive_service.common.worker import redact
from archive_service.protocol import pairs
from archive_service.resolver.app import client_ips, create_resolver_app
from archive_service.resolver.registry import Registry
from archive_service.web import create_app
from resolver_support import (
    DOUBLE,
    KEY_A,
    KEY_B,
    LL8,
    PLATFORM,
    RESOLVER_IBI,
    SERVICE_A,
    SERVICE_B,
    ThreadedServer,
    build_collections,
)
from serve_process import free_port, wait_until

SERVICE = "/" + RESOLVER_IBI


class Recorder:
    """Wraps an Archive app to see the service requests it receives (what a log would show)."""

    def __init__(self, app):
        self.app, self.seen = app, []

    def __call__(self, environ, start_response):
        query = dict(parse_qsl(environ.get("QUERY_STRING", ""), keep_blank_values=True))
        if "servicesubject" in query:
            self.seen.append(query)
        return self.app(environ, start_response)

    def subjects(self, subject):
        return [q for q in self.seen if q["servicesubject"] == subject]


@pytest.fixture(scope="module")
def archives(tmp_path_factory):
    base = tmp_path_factory.mktemp("archives")
    a, b = build_collections(base)
    running = {}
    for name, collection, service in (("A", a, SERVICE_A), ("B", b, SERVICE_B)):
        port = free_port()
        recorder = Recorder(
            create_app(
                {
                    "collection": str(collection),
                    "archiveaddress": f"127.0.0.1:{port}",
                    "archiveserviceibi": service,
                    "platformsoftware": PLATFORM,
                    "resolver": "none",
                    "state_dir": str(base / f"state-{name}"),
                }
            )
        )
        running[name] = (f"127.0.0.1:{port}", recorder, ThreadedServer(recorder, port))
    yield running
    for _, _, server in running.values():
        server.close()


@pytest.fixture(scope="module")
def registered(tmp_path_factory) -> Path:
    """A registry with A and B registered (scrypt is slow on purpose: do it once)."""
    registry = Registry(tmp_path_factory.mktemp("registered"))
    registry.register(SERVICE_A, KEY_A)
    registry.register(SERVICE_B, KEY_B)
    return registry.path


@pytest.fixture
def registry(tmp_path, registered):
    (tmp_path / "resolver").mkdir()
    shutil.copy(registered, tmp_path / "resolver" / registered.name)
    return Registry(tmp_path / "resolver")


PROXY = "150.163.68.1"  # Example 8.1's proxy, in front of the resolver


def resolver_app(tmp_path, archives, **more) -> webtest.TestApp:
    for _, recorder, _ in archives.values():
        recorder.seen.clear()
    app = create_resolver_app(
        {
            "state_dir": str(tmp_path / "resolver"),
            "timeout": "2",
            "address": "resolver.example",
            **more,
        }
    )
    return webtest.TestApp(app, extra_environ={"REMOTE_ADDR": PROXY})


@pytest.fixture
def resolver(tmp_path, registry, archives):
    return resolver_app(tmp_path, archives, trusted_proxies=PROXY)


def announcement(subject, address, service, key, **overrides):
    params = {
        "servicesubject": subject,
        "archiveaddress": address,
        "archiveserviceibi": service,
        "archiveip": "127.0.0.1",
        "archiveprotocol": "HTTP",
        "archiveplatformversion": "2014:11.09.02.16.15",
        "archiveadmemailaddress": "banon@dpi.inpe.br",
        "registrationkey": key,
    }
    params.update(overrides)
    return {k: v for k, v in params.items() if v is not None}


def include_both(resolver, archives):
    for name, service, key in (("A", SERVICE_A, KEY_A), ("B", SERVICE_B, KEY_B)):
        response = resolver.get(
            SERVICE, announcement("inclusionRequest", archives[name][0], service, key)
        )
        assert response.text == "status.archive included\r\nstatus.confirmation successful"


# ------------------------------------------------------------------------------ registry


def test_inclusion_calls_the_archive_back_and_records_it(resolver, archives, registry):
    address, recorder, _ = archives["A"]
    response = resolver.get(SERVICE, announcement("inclusionRequest", address, SERVICE_A, KEY_A))
    assert response.content_type == "text/plain"
    assert pairs.parse(response.text) == [
        ("status.archive", "included"),
        ("status.confirmation", "successful"),
    ]
    assert recorder.subjects("inclusionConfirmationRequest") == [
        {"servicesubject": "inclusionConfirmationRequest"}
    ]  # Example 5.4: that pair alone
    (record,) = [r for r in registry.records() if r.included]
    assert (record.serviceibi, record.address, record.confirmation) == (
        SERVICE_A,
        address,
        "successful",
    )


def test_inclusion_without_confirmation_still_includes(resolver, registry):
    with socket.socket() as closed:  # nothing listens at this address
        closed.bind(("127.0.0.1", 0))
        address = f"127.0.0.1:{closed.getsockname()[1]}"
    response = resolver.get(SERVICE, announcement("inclusionRequest", address, SERVICE_B, KEY_B))
    assert pairs.parse(response.text) == [
        ("status.archive", "included"),
        ("status.confirmation", "unsuccessful"),
    ]
    assert [r.confirmation for r in registry.records() if r.included] == ["unsuccessful"]


def test_wrong_or_unregistered_keys_are_refused_and_logged_without_the_key(
    resolver, archives, registry, caplog
):
    caplog.set_level(logging.INFO)
    address = archives["A"][0]
    for service, key in (
        (SERVICE_A, "1234567899"),
        (SERVICE_A, KEY_B),
        ("sid.inpe.br/unknown/2020/01.01.00.00", KEY_A),
    ):
        for subject in ("inclusionRequest", "exclusionRequest"):
            response = resolver.get(
                SERVICE, announcement(subject, address, service, key), status=403
            )
            assert response.text.startswith("error {" + subject + " refused")
            assert key not in response.text
            assert key not in caplog.text
    assert "refused for " + SERVICE_A in caplog.text
    assert not any(r.included for r in registry.records())
    assert archives["A"][1].seen == []  # no callback for a refused Archive


@pytest.mark.parametrize(
    "overrides,reason",
    [
        ({"servicesubject": None}, "servicesubject is missing"),
        ({"servicesubject": "urlRequest"}, "unknown servicesubject urlRequest"),
        ({"archiveip": None}, "needs archiveip"),
        ({"archiveprotocol": "USP"}, "archiveprotocol must be HTTP"),
        ({"archiveaddress": "http://x/"}, "archiveaddress must be host"),
        # Each was taken before: port 0 was asked at 80, the others named another host (or
        # none) to a reader of the URLs built from them.
        ({"archiveaddress": "127.0.0.1:0"}, "archiveaddress the port must be a number from 1"),
        ({"archiveaddress": "@evil.example"}, "archiveaddress must be host"),
        ({"archiveaddress": "a.example#b.example"}, "archiveaddress must be host"),
        ({"archiveaddress": "a.example b.example"}, "archiveaddress must be host"),
        ({"archiveaddress": "\u00e1.example"}, "archiveaddress must be ASCII"),
        ({"archiveaddress": "[::1"}, "archiveaddress must be host"),
        ({"archiveserviceibi": "not-an-ibi"}, "archiveserviceibi IBI"),
        ({"archiveadmemailaddress": "banon"}, "archiveadmemailaddress must be an e-mail"),
        ({"registrationkey": "12345"}, "registrationkey breaks Table 5.1"),
    ],
)
def test_malformed_announcements_get_a_400_saying_what(resolver, overrides, reason):
    params = announcement("inclusionRequest", "127.0.0.1:9", SERVICE_A, KEY_A, **overrides)
    response = resolver.get(SERVICE, params, status=400)
    assert response.content_type == "text/plain"
    assert reason in response.text
    assert "12345" not in response.text


def test_exclusion_stops_the_archive_being_asked(resolver, archives, registry):
    include_both(resolver, archives)
    assert resolver.get("/8JMKD3MGP8W/35MMLL8!").status_int == 302  # B holds the next edition
    response = resolver.get(
        SERVICE, announcement("exclusionRequest", archives["B"][0], SERVICE_B, KEY_B)
    )
    assert response.text == "status.archive excluded"
    archives["B"][1].seen.clear()
    alert = resolver.get("/8JMKD3MGP8W/35MMLL8!", status=404)
    assert (
        "sid.inpe.br/mtc-m18/2012/07.12.18.08 (reached from 8JMKD3MGP8W/35MMLL8) is not known"
        " to any of the 1 included Archives" in alert.text
    )
    assert archives["B"][1].seen == []
    # Registration is kept: the Archive comes back with its key, even at a new address.
    include_both(resolver, archives)
    assert resolver.get("/8JMKD3MGP8W/35MMLL8!").status_int == 302


# ---------------------------------------------------------------------------- resolution


def test_a_forwarded_for_is_read_only_from_a_trusted_proxy(tmp_path, registry, archives):
    # Issue 30, finding 11: any client's X-Forwarded-For was taken as the user, so a client
    # chose the address a licensed item's Archive checks and COUNTER counts.
    untrusting = resolver_app(tmp_path, archives)  # trusted_proxies: loopback only
    include_both(untrusting, archives)
    forged = {"X-Forwarded-For": "10.1.2.3, 172.16.44.200"}
    assert untrusting.get("/8JMKD3MGP8W/35MMLL8", headers=forged).status_int == 302
    local = {"REMOTE_ADDR": "127.0.0.1"}  # a proxy on loopback names the user last
    assert untrusting.get("/8JMKD3MGP8W/35MMLL8", headers=forged, extra_environ=local)
    asked = [q["clientinformation.ipaddress"] for q in archives["A"][1].subjects("urlRequest")]
    assert asked == [PROXY, "172.16.44.200 127.0.0.1"]


def test_resolution_redirects_and_acknowledges_example_8_1(resolver, archives):
    include_both(resolver, archives)
    a_address, a_seen, _ = archives["A"]
    response = resolver.get(
        "/8JMKD3MGP8W/35MMLL8",
        headers={"X-Forwarded-For": "172.16.44.200", "Accept-Language": "pt-BR,fr;q=0.8"},
    )
    assert response.status_int == 302
    target = f"http://{a_address}/col/{LL8}/doc/CCSDS%20650.0-B-1.pdf"
    assert response.location == target
    ips = "172.16.44.200 150.163.68.1"  # the user, then the proxy (Example 8.1)
    for name in ("A", "B"):
        assert archives[name][1].subjects("urlRequest") == [
            {
                "servicesubject": "urlRequest",
                "clientinformation.ipaddress": ips,
                "parsedibiurl.ibi": "8JMKD3MGP8W/35MMLL8",
            }
        ]

    # Sent after the redirect (issue 24), off the request: an earlier test's acknowledgment
    # (another client address) may still land at A or B after this test began, so this
    # resolution's is told by its client information.
    def ours() -> list[dict]:
        sent = a_seen.subjects("acknowledgment")
        return [a for a in sent if a.get("clientinformation.ipaddress") == ips]

    (ack,) = wait_until(ours, what="the acknowledgment")
    # Only A, which gave the URL, is acknowledged for this resolution.
    at_b = archives["B"][1].subjects("acknowledgment")
    assert [a for a in at_b if a.get("clientinformation.ipaddress") == ips] == []
    assert ack == {
        "servicesubject": "acknowledgment",
        "clientinformation.ipaddress": ips,
        "contenttype": "Data",
        "ibi": f"rep {LL8} ibip 8JMKD3MGP8W/35MMLL8",
        "state": "Original",
        "url": target,
        "url.persistent": "http://resolver.example/8JMKD3MGP8W/35MMLL8",
        "urlkey": ack["urlkey"],
    }
    assert len(ack["urlkey"]) >= 21


def test_head_requests_are_not_acknowledged_and_item_query_pairs_pass_on(resolver, archives):
    include_both(resolver, archives)
    response = resolver.head("/LK47B6W/362SFKH/reference.bib?format=long&ibiurl.verblist=")
    assert response.status_int == 302
    assert response.location.endswith("/doc/reference.bib?format=long")
    assert archives["A"][1].subjects("acknowledgment") == []


def test_alerts_are_html_pages_with_the_reason(resolver, archives):
    include_both(resolver, archives)
    bad = resolver.get("/8JMKD3MGP8W/35MMLL8!!", status=400)
    assert bad.content_type == "text/html" and "is not one of Table 6.2" in bad.text
    hostile = resolver.get("/<script>alert(1)</script>/x", status=400)
    assert "<script>" not in hostile.text and "&lt;script&gt;" in hostile.text
    conflict = resolver.get(f"/{DOUBLE}?ibiurl.requireditemstatus=Original", status=409)
    assert "Archives under suspicion" in conflict.text
    for name, service in (("A", SERVICE_A), ("B", SERVICE_B)):
        assert f"{archives[name][0]} (service {service})" in conflict.text
    removed = resolver.get("/iconet.com.br/banon/2010/01.20.11.05", status=404)
    assert "was removed on 2015-03-02T09:15:00Z" in removed.text
    assert resolver.get("/").status_int == 200


def test_no_archive_included(resolver):
    assert "no Archive is included" in resolver.get("/LK47B6W/362SFKH", status=503).text


def test_an_archive_that_never_answers_costs_one_timeout(tmp_path, registry, archives):
    include = create_resolver_app({"state_dir": str(tmp_path / "resolver"), "timeout": "0.5"})
    app = webtest.TestApp(include)
    include_both(app, archives)
    # A party that accepts connections and never answers, included like any Archive.
    hung = socket.socket()
    hung.bind(("127.0.0.1", 0))
    hung.listen(8)
    accepted = []
    stop = threading.Event()

    def accept():
        hung.settimeout(0.1)
        while not stop.is_set():
            try:
                accepted.append(hung.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        registry.register("sid.inpe.br/hung/2020/01.01.00.00", "5555555555")
        address = f"127.0.0.1:{hung.getsockname()[1]}"
        status = app.get(
            SERVICE,
            announcement(
                "inclusionRequest", address, "sid.inpe.br/hung/2020/01.01.00.00", "5555555555"
            ),
        ).text
        assert status.endswith("status.confirmation unsuccessful")
        assert app.get("/8JMKD3MGP8W/35MMLL8").status_int == 302
        unknown = app.get("/8JMKD3MGP8W/35MMLL9", status=404)
        assert "1 of them did not answer" in unknown.text
        assert f"{address} (service sid.inpe.br/hung/2020/01.01.00.00)" in unknown.text
    finally:
        stop.set()
        thread.join()
        for conn in accepted:
            conn.close()
        hung.close()


# --------------------------------------------------------------------------- small parts


@pytest.mark.parametrize(
    "forwarded,remote,expected",
    [
        (None, "150.163.2.175", "150.163.2.175"),
        ("172.16.44.200", "150.163.68.1", "150.163.68.1"),  # no proxy of ours: not read
        ("172.16.44.200", "10.0.0.7", "172.16.44.200 10.0.0.7"),  # a trusted one
        ("10.0.0.1, 172.16.0.9", "127.0.0.1", "172.16.0.9 127.0.0.1"),  # the user's own: not
        ("172.16.0.9, 10.0.0.7", "127.0.0.1", "172.16.0.9 10.0.0.7 127.0.0.1"),
        ("unknown, 2001:db8::1", "::1", "2001:db8::1 ::1"),
        ("garbage", "", "0.0.0.0"),
        ("garbage", "127.0.0.1", "0.0.0.0 127.0.0.1"),
        (None, "", "127.0.0.1"),  # a Unix socket's peer naming no one: this machine
        (None, "::ffff:150.163.2.175", "150.163.2.175"),
    ],
)
def test_client_ips(forwarded, remote, expected):
    environ = {"REMOTE_ADDR": remote}
    if forwarded is not None:
        environ["HTTP_X_FORWARDED_FOR"] = forwarded
    trusted = [ipaddress.ip_network(n) for n in ("127.0.0.0/8", "::1/128", "10.0.0.7/32")]
    assert client_ips(environ, trusted) == expected


@pytest.mark.parametrize("name", ["registrationkey", "RegistrationKey", "%72egistrationkey"])
def test_access_log_redaction(name):
    # The registry takes a name however percent-encoded (pairs.parse_query decodes it): a
    # pattern of the plain name left `%72egistrationkey=KEY` in the log.
    line = f"GET /J8LNKB5R7W/3FUQHC5?servicesubject=x&{name}=1234567890&a=b HTTP/1.1"
    assert redact(line) == (
        f"GET /J8LNKB5R7W/3FUQHC5?servicesubject=x&{name}=<secret>&a=b HTTP/1.1"
    )


def test_the_key_is_stored_only_as_a_hash(registry):
    data = registry.path.read_bytes()
    assert KEY_A.encode() not in data and KEY_B.encode() not in data
    assert registry.check_key(SERVICE_A, KEY_A) and not registry.check_key(SERVICE_A, KEY_B)
    assert registry.check_key(SERVICE_A.upper(), KEY_A)  # IBIs are case-insensitive


def test_a_failing_registry_makes_health_503_without_saying_where_it_is(tmp_path, archives):
    """/health is public: it says the registry is failing, the log says where and why (a
    PostgreSQL error names its host, SQLite's its path)."""
    app = resolver_app(tmp_path, archives)
    database = tmp_path / "resolver" / "resolver-registry.sqlite3"
    for path in database.parent.glob(database.name + "*"):
        path.unlink()
    database.write_bytes(b"not a database " * 512)
    got = app.get("/health", status=503)
    assert got.json == {"status": "failing", "registry": "unavailable"}
