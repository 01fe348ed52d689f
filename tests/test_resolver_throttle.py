"""Wrong-key inclusion and exclusion requests cannot make the resolver run scrypt without
bound (issue 15: 31 such requests per second raised resolution latency 20x): past a burst of
refused checks, a source is answered HTTP 429 before any scrypt; right keys cost it nothing,
and an Archive's own right keys are bounded too (a burst per Archive, then 429)."""

from __future__ import annotations

import threading
import time

import pytest
import webtest

from archive_service.resolver import registry as registry_module
from archive_service.resolver.app import create_resolver_app
from archive_service.resolver.registry import KeyThrottle, Registry
from resolver_support import KEY_A, RESOLVER_IBI, SERVICE_A

SERVICE = "/" + RESOLVER_IBI
FLOODER, OTHER = "203.0.113.9", "198.51.100.4"


@pytest.fixture
def resolver(tmp_path):
    Registry(tmp_path / "state").register(SERVICE_A, KEY_A)
    return webtest.TestApp(create_resolver_app({"state_dir": str(tmp_path / "state")}))


def request(subject: str, key: str) -> dict[str, str]:
    return {
        "servicesubject": subject,
        "archiveaddress": "127.0.0.1:9",
        "archiveserviceibi": SERVICE_A,
        "archiveip": "127.0.0.1",
        "archiveprotocol": "HTTP",
        "archiveplatformversion": "test",
        "archiveadmemailaddress": "admin@example.org",
        "registrationkey": key,
    }


def wrong(i: int) -> dict[str, str]:
    return request("inclusionRequest", f"{5000000000 + i:010d}")


def test_a_source_past_its_burst_of_wrong_keys_gets_429_without_scrypt(resolver):
    for i in range(KeyThrottle.BURST):
        resolver.get(SERVICE, wrong(i), extra_environ={"REMOTE_ADDR": FLOODER}, status=403)
    started = time.perf_counter()
    for i in range(20):
        response = resolver.get(
            SERVICE, wrong(100 + i), extra_environ={"REMOTE_ADDR": FLOODER}, status=429
        )
    per_request = (time.perf_counter() - started) / 20
    assert per_request < 0.010, f"{per_request * 1000:.1f} ms: scrypt ran"  # scrypt: ~50 ms
    assert response.text.startswith("error {too many refused")
    assert FLOODER in response.text
    assert int(response.headers["Retry-After"]) >= 1
    # The right key from the flooding source waits too (it cannot be told apart without scrypt),
    assert resolver.get(
        SERVICE,
        request("exclusionRequest", KEY_A),
        extra_environ={"REMOTE_ADDR": FLOODER},
        status=429,
    )
    # …but other sources do not.
    assert (
        resolver.get(
            SERVICE, request("exclusionRequest", KEY_A), extra_environ={"REMOTE_ADDR": OTHER}
        ).text
        == "status.archive excluded"
    )
    resolver.get(SERVICE, wrong(999), extra_environ={"REMOTE_ADDR": OTHER}, status=403)


def test_right_keys_do_not_use_up_the_burst(resolver):
    for _ in range(KeyThrottle.BURST + 2):
        assert (
            resolver.get(
                SERVICE, request("exclusionRequest", KEY_A), extra_environ={"REMOTE_ADDR": OTHER}
            ).text
            == "status.archive excluded"
        )
    resolver.get(SERVICE, wrong(0), extra_environ={"REMOTE_ADDR": OTHER}, status=403)


def test_an_archives_own_key_past_its_burst_gets_429_without_scrypt(tmp_path, monkeypatch):
    # Right keys cost scrypt (61 ms of CPU) and a confirmation each: a registered Archive's
    # own key was a flood without bound (issue 30's second adversarial pass).
    monkeypatch.setattr(registry_module, "ACCEPTED_BURST", 3)  # three scrypts, not twenty
    Registry(tmp_path / "state").register(SERVICE_A, KEY_A)
    resolver = webtest.TestApp(create_resolver_app({"state_dir": str(tmp_path / "state")}))
    right = request("exclusionRequest", KEY_A)
    for _ in range(3):
        resolver.get(SERVICE, right, extra_environ={"REMOTE_ADDR": OTHER}, status=200)
    for source in (OTHER, FLOODER):  # the Archive's, whoever sends it
        response = resolver.get(SERVICE, right, extra_environ={"REMOTE_ADDR": source}, status=429)
        assert response.text.startswith(
            f"error {{too many inclusion and exclusion requests for {SERVICE_A}"
        )
        assert int(response.headers["Retry-After"]) >= 1


def test_wrong_keys_from_many_ipv6_64s_get_429_past_a_burst_of_all_sources(tmp_path, monkeypatch):
    """Each IPv6 /64 is a source: one host with a /48 is 65,536 of them, and 16 clients each
    from a new /64 ran a scrypt per request, never refused (the eighth adversarial pass)."""
    monkeypatch.setattr(registry_module, "ANY_BURST", 3, raising=False)  # 3 scrypts, not 20
    Registry(tmp_path / "state").register(SERVICE_A, KEY_A)
    resolver = webtest.TestApp(create_resolver_app({"state_dir": str(tmp_path / "state")}))

    def net(i: int) -> dict[str, str]:
        return {"REMOTE_ADDR": f"2001:db8:{i:x}::1"}

    for i in range(3):
        resolver.get(SERVICE, wrong(i), extra_environ=net(i), status=403)
    started = time.perf_counter()
    response = resolver.get(SERVICE, wrong(3), extra_environ=net(3), status=429)
    assert time.perf_counter() - started < 0.030  # no scrypt (~50 ms)
    assert response.text.startswith("error {too many refused inclusion and exclusion requests")
    assert "from all sources" in response.text
    assert int(response.headers["Retry-After"]) >= 1


def test_behind_a_local_proxy_the_forwarded_client_is_the_source(resolver):
    proxied = {"REMOTE_ADDR": "127.0.0.1", "HTTP_X_FORWARDED_FOR": FLOODER}
    for i in range(KeyThrottle.BURST):
        resolver.get(SERVICE, wrong(i), extra_environ=proxied, status=403)
    resolver.get(SERVICE, wrong(50), extra_environ=proxied, status=429)
    resolver.get(
        SERVICE,
        wrong(51),
        extra_environ={"REMOTE_ADDR": "127.0.0.1", "HTTP_X_FORWARDED_FOR": OTHER},
        status=403,
    )


def test_the_bucket_refills_and_ipv6_sources_count_by_64():
    now = [0.0]
    throttle = KeyThrottle(clock=lambda: now[0])
    for _ in range(KeyThrottle.BURST):
        assert throttle.take("2001:db8::1") == 0
    assert throttle.take("2001:db8::2") > 0  # the same /64
    assert throttle.take("2001:db8:0:1::1") == 0  # another /64
    now[0] += 1 / KeyThrottle.RATE
    assert throttle.take("2001:db8::3") == 0
    assert throttle.take("2001:db8::3") > 0


def test_past_max_sources_a_source_is_still_throttled_and_idle_ones_are_forgotten():
    """Past MAX_SOURCES, the buckets compared were the stored ones, not refilled: the source
    just charged (9 tokens) was forgotten at once, so once enough sources had each spent two
    checks (an IPv6 /48 holds 65,536 /64s), every new source had unlimited scrypt checks,
    and those spent buckets were never forgotten."""
    now = [0.0]
    throttle = KeyThrottle(clock=lambda: now[0])
    throttle.MAX_SOURCES = 50
    for i in range(throttle.MAX_SOURCES + 1):
        for _ in range(2):
            assert throttle.take(f"2001:db8:0:{i:x}::1") == 0
    attacker = "2001:db8:1::1"
    refused = [throttle.take(attacker) for _ in range(KeyThrottle.BURST + 5)]
    assert refused.count(0) == KeyThrottle.BURST and refused[-1] > 0
    # Once refilled, they are forgotten at the next check.
    now[0] += KeyThrottle.BURST / KeyThrottle.RATE
    throttle.take("2001:db8:2::1")
    assert len(throttle._buckets) <= 2


def test_an_archives_own_keys_sent_at_once_get_no_more_than_its_burst(tmp_path, monkeypatch):
    # Each request looked at the Archive's bucket before scrypt and was charged after it (61
    # ms later): whatever came in that while passed. Sent together, 8 right keys made 8
    # registry writes and 8 confirmations (each holding a thread up to the timeout), and
    # again each time the bucket refilled (the last adversarial pass).
    monkeypatch.setattr(registry_module, "ACCEPTED_BURST", 1)
    registry = Registry(tmp_path / "state")
    registry.register(SERVICE_A, KEY_A)
    confirmed, start = [], threading.Barrier(8)

    def include() -> None:
        start.wait()
        try:
            registry.handle(request("inclusionRequest", KEY_A), confirmed.append, source=OTHER)
        except registry_module.Throttled:
            pass

    threads = [threading.Thread(target=include) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(confirmed) == 1


def test_wrong_keys_from_many_sources_do_not_keep_an_archive_out(tmp_path, monkeypatch):
    """The all-sources bucket was the one door: wrong keys from many /64s, about one a second
    a worker, kept it empty, and a registered Archive restarting (serve's stop excludes it)
    had each inclusion with its right key refused 429 for as long as they came: 4 of 4 on a
    real resolver, its readers getting 404s (the twelfth adversarial pass). From an address
    it was included at, the Archive's key is checked; from elsewhere it still waits."""
    monkeypatch.setattr(registry_module, "ANY_BURST", 3, raising=False)
    Registry(tmp_path / "state").register(SERVICE_A, KEY_A)
    resolver = webtest.TestApp(create_resolver_app({"state_dir": str(tmp_path / "state")}))
    home = {"REMOTE_ADDR": OTHER}

    def announced(subject: str) -> dict[str, str]:
        return {**request(subject, KEY_A), "archiveip": OTHER}

    assert "included" in resolver.get(SERVICE, announced("inclusionRequest"), extra_environ=home)
    resolver.get(SERVICE, announced("exclusionRequest"), extra_environ=home)  # its stop
    for i in range(3):
        resolver.get(
            SERVICE, wrong(i), extra_environ={"REMOTE_ADDR": f"2001:db8:{i:x}::1"}, status=403
        )
    flooded = resolver.get(
        SERVICE, wrong(3), extra_environ={"REMOTE_ADDR": "2001:db8:3::1"}, status=429
    )
    assert "from all sources" in flooded.text
    back = resolver.get(SERVICE, announced("inclusionRequest"), extra_environ=home)
    assert back.text.startswith("status.archive included"), back.text
    elsewhere = resolver.get(
        SERVICE, announced("exclusionRequest"), extra_environ={"REMOTE_ADDR": FLOODER}, status=429
    )
    assert "from all sources" in elsewhere.text


def test_an_archive_registered_with_the_networks_it_sends_from_joins_through_a_flood(
    tmp_path, monkeypatch
):
    """Wrong keys from many /64s kept the all-sources bucket empty, and an Archive not yet
    included (or moved) was refused its first inclusion for as long as they came: 0 of 20
    in 20 s (the thirteenth adversarial pass). Registered with `--from` the networks it
    sends from, it is checked from there; from elsewhere it still waits."""
    monkeypatch.setattr(registry_module, "ANY_BURST", 3, raising=False)
    Registry(tmp_path / "state").register(SERVICE_A, KEY_A, ("192.0.2.0/24",))
    resolver = webtest.TestApp(create_resolver_app({"state_dir": str(tmp_path / "state")}))
    for i in range(3):
        resolver.get(
            SERVICE, wrong(i), extra_environ={"REMOTE_ADDR": f"2001:db8:{i:x}::1"}, status=403
        )
    elsewhere = resolver.get(
        SERVICE,
        request("inclusionRequest", KEY_A),
        extra_environ={"REMOTE_ADDR": OTHER},
        status=429,
    )
    assert "from all sources" in elsewhere.text
    first = resolver.get(
        SERVICE, request("inclusionRequest", KEY_A), extra_environ={"REMOTE_ADDR": "192.0.2.7"}
    )
    assert first.text.startswith("status.archive included"), first.text
    # Re-keyed without --from, it keeps them; `none` clears them.
    registry = Registry(tmp_path / "state")
    registry.register(SERVICE_A, KEY_A)
    assert [r.sends_from for r in registry.records()] == ["192.0.2.0/24"]
    registry.register(SERVICE_A, KEY_A, ())
    assert [r.sends_from for r in registry.records()] == [""]
