"""What a worker's index reader keeps per state of the index (index/catalog.py's generation
cache) for IBIs and item directories nobody holds: bounded in characters as well as in
entries, since a requester chooses how long each one is."""

from __future__ import annotations

import gc
import tracemalloc
import urllib.parse

import webtest

from archive_service.web import create_app
from support import SERVICE


def test_requests_naming_long_unknown_ibis_leave_no_memory_behind(settings):
    """The cache's 16,384 entries a dict held each IBI a landing page, metadata record or
    /col/ path named, as long as the request line allows (8 KB): 4,000 such requests took a
    worker from 39 to 72 MB, ~300 MB at the bound (issue 30, eighth adversarial pass)."""
    site = webtest.TestApp(create_app(settings))

    def ask(n: int) -> None:
        word = f"{n:06d}" + "a" * 4000
        site.get(f"/{SERVICE}/item/x.example/{word}", status=404)
        site.get(f"/col/x.example/{word}/doc/a.pdf", status=404)

    for n in range(20):  # what the first requests build once (templates, statements)
        ask(n)
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for n in range(20, 120):
            ask(n)
        urllib.parse.clear_cache()  # urlsplit's 128 URLs, kept by WebTest's side
        gc.collect()
        kept = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert kept < 200_000, f"{kept:,} bytes kept by 100 pairs of requests"
    # An item held is still answered, from the cache as before.
    site.get(f"/{SERVICE}/item/iconet.com.br/banon/2012/03.05.08.15", status=200)
