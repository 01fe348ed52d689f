"""An Archive registered at the resolver's own address (issue 15): the real `archive-service
resolver serve` refuses such an inclusion, and a looping registration already in the registry
is detected at resolution time instead of recursing until the timeout."""

from __future__ import annotations

import time

import pytest

from archive_service.resolver.registry import Registry
from resolver_support import KEY_A, RESOLVER_IBI, SERVICE_A, service_call
from serve_process import Process, free_port, http_get

TIMEOUT = 3  # the resolver's --timeout: what the loop cost before


@pytest.fixture(scope="module")
def running(tmp_path_factory):
    base = tmp_path_factory.mktemp("loop")
    Registry(base / "state").register(SERVICE_A, KEY_A)
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    resolver = Process(
        [
            "resolver",
            "serve",
            "--state-dir",
            str(base / "state"),
            "--bind",
            f"127.0.0.1:{port}",
            "--address",
            "resolver.example.org",
            "--timeout",
            str(TIMEOUT),
        ],
        base / "resolver.log",
    )
    resolver.start()
    try:
        resolver.wait_answering(url + "/")
        yield url, port, Registry(base / "state"), resolver
    finally:
        resolver.stop()


def inclusion(address: str) -> dict[str, str]:
    return {
        "servicesubject": "inclusionRequest",
        "archiveaddress": address,
        "archiveserviceibi": SERVICE_A,
        "archiveip": "127.0.0.1",
        "archiveprotocol": "HTTP",
        "archiveplatformversion": "test",
        "archiveadmemailaddress": "admin@example.org",
        "registrationkey": KEY_A,
    }


@pytest.mark.process
@pytest.mark.parametrize(
    "spelling",
    [
        "127.0.0.1:{port}",
        "localhost:{port}",
        "LocalHost.:{port}",
        "[::1]:{port}",
        "resolver.example.org",
        "RESOLVER.example.org:80",
    ],
)
def test_an_inclusion_at_the_resolvers_own_address_is_refused(running, spelling):
    url, port, registry, _ = running
    started = time.monotonic()
    status, body = service_call(f"{url}/{RESOLVER_IBI}", **inclusion(spelling.format(port=port)))
    assert (status, body.startswith("error")) == (403, True), body
    assert "resolver's own address" in body
    assert time.monotonic() - started < 1
    assert not any(r.included for r in registry.records())


@pytest.mark.process
def test_a_looping_registration_answers_at_once(running):
    url, port, registry, resolver = running
    with registry._db() as run:  # as an older resolver would have let it in
        run("UPDATE {table} SET included = 1, address = ?", (f"127.0.0.1:{port}",))
    try:
        started = time.monotonic()
        status, _, body = http_get(f"{url}/8JMKD3MGP8W/35MME4E", timeout=30)
        elapsed = time.monotonic() - started
        assert elapsed < 1, f"{elapsed:.2f} s"
        assert status == 502, body
        assert "loop" in resolver.text()
    finally:
        with registry._db() as run:
            run("UPDATE {table} SET included = 0")


@pytest.mark.parametrize(
    "bind, public, archiveaddress, own",
    [
        ("0.0.0.0:8090", "", "127.0.0.1:8090", True),
        ("0.0.0.0:8090", "", "localhost:8090", True),
        ("0.0.0.0:8090", "", "127.0.0.1:8091", False),
        ("127.0.0.1:8090", "", "192.0.2.7:8090", False),  # not this machine's
        ("127.0.0.1:8090", "resolver.example.org", "resolver.example.org:8090", False),
        ("127.0.0.1:8090", "resolver.example.org:8443", "Resolver.Example.org.:8443", True),
        ("unix:/run/resolver.sock", "resolver.example.org", "resolver.example.org", True),
        ("unix:/run/resolver.sock", "resolver.example.org", "archive.example.org", False),
    ],
)
@pytest.mark.process
def test_own_address_spellings(bind, public, archiveaddress, own):
    from archive_service.resolver.loops import OwnAddress

    assert OwnAddress(bind, public)(archiveaddress) is own


def test_a_request_that_went_round_other_resolvers_is_a_loop():
    from archive_service.resolver.loops import MAX_HOPS, PSEUDONYM, loop_reason

    me = f"{PSEUDONYM}-1"
    assert loop_reason("", me) is None
    assert loop_reason(f"1.1 proxy, 1.1 {PSEUDONYM}-2", me) is None
    assert "itself" in loop_reason(f"1.1 {PSEUDONYM}-2, 1.0 {me} (comment)", me)
    others = ", ".join(f"1.1 {PSEUDONYM}-{n}" for n in range(2, 2 + MAX_HOPS))
    assert "passed through" in loop_reason(others, me)


@pytest.mark.process
def test_a_loop_refused_writes_the_path_on_one_line_of_the_log(running):
    """The loop's warning named the path as Werkzeug decoded it: any client sending four
    Via entries of this kit wrote a line of its own (`%0a`) and terminal escapes (`%1b`) into
    the resolver's log (adversarial pass over issue 30, second round)."""
    url, _, _, resolver = running
    via = ", ".join(f"1.1 archive-service-resolver-{i}" for i in range(4))
    forged = "2026-01-01 00:00:00,000 [1] INFO archive_service: FORGED"
    path = "/x%0a" + forged.replace(" ", "%20") + "%1b[2J"
    assert http_get(url + path, headers={"Via": via})[0] == 508
    resolver.wait_log("passed through 4 resolvers")
    lines = resolver.text().splitlines()
    assert not any(line.startswith(forged) for line in lines)
    assert "\x1b" not in resolver.text()
    assert any("GET /x\\n2026-01-01" in line for line in lines)
