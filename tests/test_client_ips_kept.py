"""clientinformation.ipaddress as a worker keeps it (issue 30, fourth adversarial pass): what
stays in memory after many distinct long address lists is bounded by the addresses, not the
texts a requester chooses."""

from __future__ import annotations

import gc
import tracemalloc

import pytest

from archive_service.protocol.errors import RequestError
from archive_service.protocol.requests import _client_ips


def test_many_long_address_lists_keep_little():
    # 100 texts of ~4 KB, each 1,360 addresses and one its own: before, each text and its
    # tuple were kept (91 KB a text, 9 MB here, 370 MB at the cache's 4,096).
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for i in range(100):
            ips = _client_ips(f"::{i:x} " + " ".join(["::"] * 1360))
            assert len(ips) == 1361
        del ips
        gc.collect()
        kept = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert kept < 1_000_000, f"{kept} bytes kept"


def test_the_user_first_then_the_proxies():
    assert [str(a) for a in _client_ips("192.0.2.1 ::1")] == ["192.0.2.1", "::1"]


def test_a_word_that_is_no_address_is_refused():
    with pytest.raises(RequestError, match="IP addresses separated by spaces"):
        _client_ips("192.0.2.1 nobody")
