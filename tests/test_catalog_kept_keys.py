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


def test_items_of_large_records_are_kept_within_a_bound_of_characters(
    settings, collection, monkeypatch
):
    """The cache counted items, 16,384 of them, as if each were the 2 KB a record decodes to;
    a sidecar's 64 KiB of short dc values decodes to 0.6 MB, and landing pages of 200 such
    items (an import of a hostile provider's records, a depositor's) took a worker from 63 to
    181 MB (issue 30, ninth adversarial pass). The records kept are counted in characters
    too (catalog.HELD, made small here), and past them the cache starts afresh."""
    from archive_service.index import catalog

    monkeypatch.setattr(catalog, "HELD", 200_000, raising=False)
    names = []
    for n in range(16):
        name = f"example.org/archive/2026/11.27.10.{n:02d}"
        (collection / name / "doc").mkdir(parents=True)
        (collection / name / "doc" / "a.txt").write_text("a")
        values = "".join(f"  - {n:02d}{i:05d}\n" for i in range(5000))
        (collection / name / "item.yaml").write_text(f"dc:\n  title: [T]\n  subject:\n{values}")
        names.append(name)
    site = webtest.TestApp(create_app(settings))
    site.get(f"/{SERVICE}/item/iconet.com.br/banon/2012/03.05.08.15", status=200)
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for name in names:
            site.get(f"/{SERVICE}/item/{name}", status=200)
        gc.collect()
        kept = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert kept < 2_000_000, f"{kept:,} bytes kept by 16 landing pages"
