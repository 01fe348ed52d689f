"""The resolver remembers which Archives answered for an IBI and asks them first (issue 24):
a resolution's cost does not grow with the number of included Archives, a moved item is
still found, the Original is still compared across every Archive, entries expire, several
instances share them through PostgreSQL, and a silent Archive delays no resolution that did
not need it.

Archives A and B are the project's app on real loopback sockets (the collections of
resolver_support); C serves A's collection under another service IBI but answers empty for
every IBI until a test moves 8JMKD3MGP8W/35MMLL8 there; S accepts connections and never
answers.
"""

from __future__ import annotations

import contextlib
import shutil
import socket
import threading
import time
from pathlib import Path
from urllib.parse import parse_qsl

import pytest
import webtest

from archive_service.resolver.app import create_resolver_app
from archive_service.resolver.registry import Registry
from resolver_support import (
    DOUBLE,
    E4E,
    KEY_A,
    KEY_B,
    LL8,
    RESOLVER_IBI,
    SERVICE_A,
    SERVICE_B,
    ThreadedServer,
    archive_app,
    build_collections,
)
from serve_process import free_port, wait_until

LL8_IBIP = "8JMKD3MGP8W/35MMLL8"
SERVICE_C = "sid.inpe.br/mtc-m19/2013/01.01.00.00"
SERVICE_S = "sid.inpe.br/silent/2020/01.01.00.00"
KEY_C, KEY_S = "1111111111", "2222222222"
TIMEOUT = 2.0


class Archive:
    """An Archive app that records the IBIs it was asked about and answers empty for the
    IBIs in `hidden`, and for all but those in `shown` unless that is None (as an Archive
    that does not hold them would)."""

    def __init__(self, app, hidden=(), shown=None):
        self.app, self.hidden, self.shown = app, set(hidden), shown
        self.asked: list[str] = []
        self.lock = threading.Lock()
        self.phase = ""  # only questions whose Via carries it are recorded (phase())

    def __call__(self, environ, start_response):
        query = dict(parse_qsl(environ.get("QUERY_STRING", ""), keep_blank_values=True))
        if query.get("servicesubject") == "urlRequest" and self.phase in environ.get(
            "HTTP_VIA", ""
        ):
            with self.lock:
                self.asked.append(query["parsedibiurl.ibi"])
            ibi = query["parsedibiurl.ibi"]
            if ibi in self.hidden or (self.shown is not None and ibi not in self.shown):
                start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", "0")])
                return [b""]
        return self.app(environ, start_response)

    def take(self) -> list[str]:
        with self.lock:
            asked, self.asked = self.asked, []
        return asked


class Silent:
    """Accepts connections, reads, never answers."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.sock.settimeout(0.1)
        self.address = f"127.0.0.1:{self.sock.getsockname()[1]}"
        self.accepted: list[socket.socket] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self):
        while not self.stop.is_set():
            try:
                self.accepted.append(self.sock.accept()[0])
            except OSError:
                continue

    def close(self):
        self.stop.set()
        self.thread.join()
        for conn in self.accepted:
            conn.close()
        self.sock.close()


@pytest.fixture(scope="module")
def bed(tmp_path_factory):
    """The Archives running, and a registry file with all four included."""
    base = tmp_path_factory.mktemp("answered")
    a, b = build_collections(base)
    archives, servers = {}, []
    for name, collection, service, shown in (
        ("A", a, SERVICE_A, None),
        ("B", b, SERVICE_B, None),
        ("C", a, SERVICE_C, set()),
    ):
        port = free_port()
        app = archive_app(collection, port, service, base / f"state-{name}")
        archives[name] = Archive(app, shown=shown)
        archives[name].address = f"127.0.0.1:{port}"
        servers.append(ThreadedServer(archives[name], port))
    silent = Silent()
    archives["S"] = silent
    state = base / "registry"
    registry = Registry(state)
    keys = {"A": (SERVICE_A, KEY_A), "B": (SERVICE_B, KEY_B), "C": (SERVICE_C, KEY_C)}
    keys["S"] = (SERVICE_S, KEY_S)
    for service, key in keys.values():
        registry.register(service, key)
    app = webtest.TestApp(create_resolver_app({"state_dir": str(state), "timeout": "0.3"}))
    for name, (service, key) in keys.items():
        include(app, archives[name].address, service, key)
    archives["registry"] = registry.path
    yield archives
    silent.close()
    for server in servers:
        server.close()


def include(app, address, service, key):
    app.get(
        "/" + RESOLVER_IBI,
        {
            "servicesubject": "inclusionRequest",
            "archiveaddress": address,
            "archiveserviceibi": service,
            "archiveip": "127.0.0.1",
            "archiveprotocol": "HTTP",
            "archiveplatformversion": "x",
            "archiveadmemailaddress": "a@b.example",
            "registrationkey": key,
        },
    )


@pytest.fixture
def resolver(tmp_path, bed):
    """A fresh resolver (nothing remembered) on a copy of the registry; its settings."""

    def make(state: Path | None = None, **settings):
        if state is None:  # else a resolver restarted over the state of an earlier one
            state = tmp_path / f"resolver-{len(list(tmp_path.iterdir()))}"
            state.mkdir()
            shutil.copy(bed["registry"], state / Path(bed["registry"]).name)
        for name in "ABC":
            bed[name].take()
            bed[name].phase = ""
            bed[name].hidden = set()
            bed[name].shown = set() if name == "C" else None
        return webtest.TestApp(
            create_resolver_app({"state_dir": str(state), "timeout": str(TIMEOUT), **settings})
        )

    return make


def phase(bed, name: str) -> dict:
    """From now on the Archives record only questions of resolutions made with the returned
    keywords (their Via, which the resolver passes on): a round ends at the first answer that
    is enough, so an earlier round's question may reach an Archive late, or never."""
    for n in "ABC":
        bed[n].phase = name
        bed[n].take()
    return {"headers": {"Via": f"1.1 {name}"}}


def asked(bed, want: list, names: str = "ABC") -> list:
    """What each Archive in `names` was asked, taken once it is `want` or 5 s have passed: a
    round settles on the first answer that is enough while the other Archives' questions may
    still be on their way (under load one reached B after the count was taken)."""
    with contextlib.suppress(AssertionError):  # a mismatch is the caller's assert to show
        wait_until(lambda: [bed[n].asked for n in names] == want, timeout=5, every=0.02)
    return [bed[n].take() for n in names]


def timed_get(app, path, **kw):
    start = time.monotonic()
    response = app.get(path, **kw)
    return response, time.monotonic() - start


def test_the_archive_that_answered_is_asked_alone_next_time(resolver, bed):
    app = resolver()
    first, took = timed_get(app, "/" + LL8_IBIP)
    assert first.location == f"http://{bed['A'].address}/col/{LL8}/doc/CCSDS%20650.0-B-1.pdf"
    # The silent Archive was not waited for: A's answer was enough.
    assert took < TIMEOUT / 2, took
    kw = phase(bed, "again")
    for _ in range(3):
        again, took = timed_get(app, "/" + LL8_IBIP, **kw)
        assert again.location == first.location and took < TIMEOUT / 2
    assert asked(bed, [[LL8_IBIP] * 3, [], []]) == [[LL8_IBIP] * 3, [], []]
    counts = app.get("/health").json["answered"]
    assert (counts["misses"], counts["hits"], counts["fallbacks"]) == (1, 3, 0)


def test_a_restarted_resolver_asks_the_archive_that_answered_first(resolver, bed, tmp_path):
    """What was learned is kept in state_dir (resolver/stores/answered/sqlite.py): a restart
    forgot it, and a new claimant of an Original could displace the one that answered first
    (issue 30)."""
    app = resolver()
    first = app.get("/" + LL8_IBIP)
    (state,) = tmp_path.iterdir()
    restarted = resolver(state=state)
    kw = phase(bed, "restarted")
    assert restarted.get("/" + LL8_IBIP, **kw).location == first.location
    assert asked(bed, [[LL8_IBIP], [], []]) == [[LL8_IBIP], [], []]
    assert restarted.get("/health").json["answered"]["hits"] == 1


def test_an_item_that_moved_is_found_elsewhere(resolver, bed):
    app = resolver()
    assert app.get("/" + LL8_IBIP).location.startswith(f"http://{bed['A'].address}/")
    bed["A"].hidden, bed["C"].shown = {LL8_IBIP}, {LL8_IBIP}  # moved from A to C
    moved = app.get("/" + LL8_IBIP, **phase(bed, "moved"))
    assert moved.location == f"http://{bed['C'].address}/col/{LL8}/doc/CCSDS%20650.0-B-1.pdf"
    # A (remembered) answered empty: the others were asked (B too, unless C's answer came
    # first); C is remembered now.
    a, b, c = asked(bed, [[LL8_IBIP]] * 3)
    assert a == c == [LL8_IBIP] and b in ([], [LL8_IBIP])
    assert app.get("/" + LL8_IBIP, **phase(bed, "after")).location == moved.location
    assert asked(bed, [[], [], [LL8_IBIP]]) == [[], [], [LL8_IBIP]]
    assert app.get("/health").json["answered"]["fallbacks"] == 1


def test_original_required_compares_every_claim(resolver, bed):
    app = resolver()
    assert app.get(f"/{DOUBLE}").status_int == 302  # both A and B remembered for it
    assert app.get(f"/{E4E}").status_int == 302  # A (Original) and B (Copy) remembered
    kw = phase(bed, "compared")
    conflict = app.get(f"/{DOUBLE}?ibiurl.requireditemstatus=Original", status=409, **kw)
    for name, service in (("A", SERVICE_A), ("B", SERVICE_B)):
        assert f"{bed[name].address} (service {service})" in conflict.text
    original = app.get(f"/{E4E}?ibiurl.requireditemstatus=Original", **kw)
    assert original.location.startswith(f"http://{bed['A'].address}/")
    # Every Archive was asked both times, C too, though nothing remembered it.
    assert asked(bed, [[DOUBLE, E4E]] * 3) == [[DOUBLE, E4E]] * 3


def test_entries_expire(resolver, bed):
    app = resolver(answered_ttl="1")
    app.get("/" + LL8_IBIP)
    app.get("/" + LL8_IBIP, **phase(bed, "remembered"))
    assert asked(bed, [[LL8_IBIP], []], "AB") == [[LL8_IBIP], []]  # B was not asked
    time.sleep(1.1)
    app.get("/" + LL8_IBIP)
    counts = app.get("/health").json["answered"]
    assert (counts["misses"], counts["hits"]) == (2, 1)  # expired: every Archive asked again


def test_answered_ttl_0_asks_every_archive_every_time(resolver, bed):
    app = resolver(answered_ttl="0")
    for _ in range(2):
        app.get("/" + LL8_IBIP)
    counts = app.get("/health").json["answered"]
    assert (counts["misses"], counts["hits"]) == (2, 0)  # nothing kept: every Archive asked


def test_a_silent_archive_delays_only_what_needs_every_answer(resolver, bed):
    app = resolver()
    unknown, took = timed_get(app, "/8JMKD3MGP8W/35MMLL9", status=404)
    assert took >= TIMEOUT * 0.9  # no Archive had it: every answer was needed
    assert "1 of them did not answer" in unknown.text
    _, took = timed_get(app, f"/{E4E}")
    assert took < TIMEOUT / 2, took


def test_instances_share_what_they_learned_through_postgresql(database_url, tmp_path, bed):
    registry = Registry(tmp_path / "unused", database_url)
    instances = [
        webtest.TestApp(
            create_resolver_app(
                {"state_dir": str(tmp_path / f"i{i}"), "timeout": "0.5", "database": database_url}
            )
        )
        for i in (1, 2)
    ]
    for name, service, key in (("A", SERVICE_A, KEY_A), ("B", SERVICE_B, KEY_B)):
        registry.register(service, key)
        include(instances[0], bed[name].address, service, key)
    for name in "AB":
        bed[name].take()
    assert instances[0].get("/" + LL8_IBIP).status_int == 302
    kw = phase(bed, "second")
    assert instances[1].get("/" + LL8_IBIP, **kw).status_int == 302  # learned from the first
    assert asked(bed, [[LL8_IBIP], []], "AB") == [[LL8_IBIP], []]


def test_a_silent_archive_is_asked_last_for_a_while(resolver, bed):
    """Each request to a silent Archive holds a thread of the pool for the timeout: once it
    gave no answer, it is asked only when the others' answers are not enough."""
    app = resolver()
    app.get(f"/{E4E}")
    time.sleep(TIMEOUT + 0.3)  # its request has timed out by now
    before = len(bed["S"].accepted)
    _, took = timed_get(app, "/" + LL8_IBIP)  # nothing remembered: every Archive but S
    assert took < TIMEOUT / 2, took
    time.sleep(0.3)
    assert len(bed["S"].accepted) == before
    unknown = app.get("/8JMKD3MGP8W/35MMLL9", status=404)  # no other answer: S asked too
    assert "1 of them did not answer" in unknown.text
    wait_until(lambda: len(bed["S"].accepted) == before + 1, what="S asked again")
