"""An Archive that trickles its answers (a byte at a time, each within the timeout) against the
resolver's ArchiveClient, on real loopback sockets (issue 30, finding 3): it is set aside as a
silent Archive is, and a round that is over lets go of it at once instead of holding a pool
thread to the deadline (bench/resolver_trickle.py measures what that cost)."""

from __future__ import annotations

import contextlib
import socket
import threading
import time

import pytest

from archive_service.resolver.archives import ArchiveClient
from archive_service.resolver.resolve import ArchiveRef
from resolver_support import SERVICE_A, SERVICE_B
from serve_process import wait_until
from test_resolver_http import ASK, Scripted, answer


class Trickler:
    """Answers every request a byte every `every` seconds; records when the resolver let go
    of each connection (seconds after it was accepted)."""

    def __init__(self, every: float = 0.05):
        self.every = every
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.ref = ArchiveRef(f"127.0.0.1:{self.listener.getsockname()[1]}", SERVICE_B)
        self.accepted = 0
        self.let_go: list[float] = []
        self.stop = threading.Event()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            self.accepted += 1
            threading.Thread(target=self._trickle, args=(conn,), daemon=True).start()

    def _trickle(self, conn: socket.socket) -> None:
        start = time.monotonic()
        with conn:
            conn.recv(65536)
            for byte in answer(b"url http://evil.example/x\r\n" * 100):
                if self.stop.wait(self.every):
                    return
                try:
                    conn.sendall(bytes([byte]))
                except OSError:
                    self.let_go.append(time.monotonic() - start)
                    return

    def close(self) -> None:
        self.stop.set()
        self.listener.close()


@pytest.fixture
def bed():
    good = Scripted(lambda n, i: (answer(), False))
    trickler = Trickler()
    made: list[ArchiveClient] = []

    def client(timeout: float) -> ArchiveClient:
        made.append(ArchiveClient(timeout))
        return made[-1]

    yield client, ArchiveRef(good.address, SERVICE_A), trickler
    for one in made:
        one.close()
    trickler.close()
    good.close()


def found(answers) -> bool:
    return any(a.pairs for a in answers)


def test_a_settled_round_lets_go_of_a_trickler_and_sets_it_aside(bed):
    client, good, trickler = bed
    client = client(5)  # the round's deadline: 5.5 s
    answers = client.ask_all([trickler.ref, good], ASK, enough=found)
    assert [a.archive for a in answers if a.pairs] == [good]
    # Its pool thread was held to the deadline, 5.5 s, each round.
    wait_until(lambda: trickler.let_go, timeout=2, what="the trickler's connection let go")
    assert trickler.let_go[0] < 2, trickler.let_go
    client.ask_all([trickler.ref, good], ASK, enough=found)
    assert trickler.accepted == 1  # set aside: the good Archive's answer was enough


def test_a_trickle_past_the_deadline_sets_the_archive_aside(bed):
    """Its `answer not complete` left `get` without marking the Archive quiet (only OSError
    did): a silent Archive was set aside, a trickling one asked every time."""
    client, good, trickler = bed
    client = client(0.3)
    (alone,) = client.ask_all([trickler.ref], ASK, enough=found)
    assert "not complete within 0.3 s" in alone.error
    answers = client.ask_all([trickler.ref, good], ASK, enough=found)
    assert [a.archive for a in answers] == [good]
    assert trickler.accepted == 1


def test_an_archive_set_aside_is_still_asked_when_the_others_are_not_enough(bed):
    client, good, trickler = bed
    client = client(0.3)
    client.ask_all([trickler.ref], ASK, enough=found)
    answers = client.ask_all([trickler.ref], ASK, enough=found)
    assert "not complete" in answers[0].error
    assert trickler.accepted == 2


def test_a_naming_authority_is_awaited_until_it_fails_a_deadline(bed):
    """The IBI's naming authority is waited for past the others' answers (issue 30, finding
    2), but one that gave nothing in time is not, for QUIET seconds: every first resolution
    of a down Archive's IBIs would wait the whole timeout."""
    client, good, silent = bed
    silent.every = 100  # accepts, never answers in time
    client = client(1)
    awaited = lambda archive: archive == silent.ref  # noqa: E731

    def took() -> float:
        start = time.monotonic()
        answers = client.ask_all([silent.ref, good], ASK, enough=found, awaited=awaited)
        assert [a.archive for a in answers if a.pairs] == [good]
        return time.monotonic() - start

    assert took() >= 1  # waited for: its request timed out
    assert took() < 0.5  # not any more: the good Archive's answer was enough


@contextlib.contextmanager
def slow_archive(seconds: float):
    """A scripted Archive answering every request after `seconds`, and its reference."""
    slow = Scripted(lambda n, i: (time.sleep(seconds), answer())[1:] + (False,))
    try:
        yield slow, ArchiveRef(slow.address, "sid.inpe.br/mtc-m18/2020/01.01.00.00")
    finally:
        slow.close()


def test_an_authority_merely_slower_elsewhere_is_still_awaited(bed):
    client, good, _ = bed
    with slow_archive(0.2) as (_, slow_ref):
        client = client(2)
        answers = client.ask_all([slow_ref, good], ASK, enough=found)
        assert [a.archive for a in answers] == [good]  # left out: set aside, not failing
        answers = client.ask_all(
            [slow_ref, good], ASK, enough=found, awaited=lambda a: a == slow_ref
        )
        assert {a.archive for a in answers if a.pairs} == {good, slow_ref}


def never(answers) -> bool:
    return False  # an IBI no Archive holds: every answer is needed


def one_at_a_time(client: ArchiveClient, slow: ArchiveRef, good: ArchiveRef, asked) -> None:
    """While a round waits on `slow` (slow lately), another round does not: it counts it as
    not answering at once."""
    probe = threading.Thread(
        target=client.ask_all, args=([slow, good], ASK), kwargs={"enough": never}
    )
    probe.start()
    try:
        wait_until(lambda: asked() == 2, what="the first round asking it")
        start = time.monotonic()
        answers = client.ask_all([slow, good], ASK, enough=never)
        took = time.monotonic() - start
    finally:
        probe.join()
    assert took < client.timeout / 2, took  # it waited for the deadline, 1 s
    (skipped,) = [a for a in answers if a.archive == slow]
    assert "not asked: slow lately" in skipped.error
    assert asked() == 2


def test_a_silent_archive_holds_one_round_at_a_time(bed):
    """A resolution of an IBI no Archive holds waits for each: with one included Archive
    silent, 64 clients asking such IBIs held every thread of the resolver, and other users'
    resolutions took 15-20 s (the eighth adversarial pass)."""
    client, good, silent = bed
    silent.every = 100  # accepts, never answers
    client = client(0.5)
    client.ask_all([silent.ref, good], ASK, enough=never)  # no answer by the deadline
    one_at_a_time(client, silent.ref, good, lambda: silent.accepted)


def test_an_archive_answering_slowly_holds_one_round_at_a_time(bed):
    client, good, _ = bed
    with slow_archive(0.4) as (slow, slow_ref):
        client = client(0.5)
        client.ask_all([slow_ref, good], ASK, enough=never)  # answered in 0.4 s of 0.5
        one_at_a_time(client, slow_ref, good, lambda: len(slow.requests))
