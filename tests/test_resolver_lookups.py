"""An included Archive's name whose DNS never answers holds no resolver thread past the
round's deadline, and costs one lookup at a time however many rounds ask (the adversarial
pass over issue 30: getaddrinfo took no time limit, so each round held a pool thread for
the resolver library's whole retry cycle)."""

from __future__ import annotations

import socket
import threading
import time

import pytest

from archive_service.resolver import archives, lookups


@pytest.fixture
def silent_dns(monkeypatch):
    real, asked, release = socket.getaddrinfo, [], threading.Event()

    def getaddrinfo(host, *args, **kwargs):
        if host == "silent.example" and kwargs.get("flags", 0) & socket.AI_NUMERICHOST:
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")  # as libc
        if host == "silent.example":
            asked.append(host)
            release.wait(10)  # a DNS server that never answers (until the test ends)
            raise socket.gaierror(socket.EAI_AGAIN, "Temporary failure in name resolution")
        return real(host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    monkeypatch.setattr(lookups, "_names", {})
    yield asked
    release.set()


def test_a_silent_name_gives_way_at_the_deadline_and_is_looked_up_once(silent_dns):
    for _ in range(3):  # three rounds asking the same Archive
        started = time.monotonic()
        with pytest.raises(OSError, match="not looked up in time"):
            archives._connect("silent.example:8080", 5.0, time.monotonic() + 0.3)
        assert time.monotonic() - started < 1.5
    assert silent_dns == ["silent.example"]


def test_an_address_needs_no_lookup(silent_dns):
    with pytest.raises(OSError) as refused:  # nothing listens at port 9: refused at once
        archives._connect("127.0.0.1:9", 1.0, time.monotonic() + 1.0)
    assert "not looked up" not in str(refused.value)
    assert silent_dns == []
