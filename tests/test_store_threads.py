"""The index reader under threaded workers (catalog.StoreCatalog): the threads of one process
share one cache of decoded items and rendered answers, bounded as one worker's was, while each
request still reads one snapshot of the index, never an item another thread read from a newer
one; and concurrent eviction of kept answers is safe."""

from __future__ import annotations

import gc
import sys
import threading
from pathlib import Path

import pytest

from archive_service.collection import items as index
from archive_service.index import catalog as catalogmod
from archive_service.index import store
from archive_service.protocol.answers import Links
from archive_service.testing import make_collection, rep_name
from archive_service.web import create_app
from support import SERVICE

THREADS = 8
LINKS = Links("http://archive.example.org", "/" + SERVICE)


def settings_for(collection: Path, state: Path) -> dict:
    return {
        "collection": str(collection),
        "archiveaddress": "archive.example.org",
        "archiveserviceibi": SERVICE,
        "state_dir": str(state),
    }


@pytest.fixture
def generated(tmp_path: Path):
    made = make_collection(tmp_path / "col", THREADS * 8)
    app = create_app(settings_for(tmp_path / "col", tmp_path / "state"))
    return app, made


def query(ibi: str) -> dict[str, str]:
    return {
        "servicesubject": "urlRequest",
        "clientinformation.ipaddress": "192.0.2.1",
        "parsedibiurl.ibi": ibi,
    }


def live_items() -> int:
    gc.collect()
    return sum(1 for o in gc.get_objects() if type(o) is index.Item)


def in_threads(work, count: int = THREADS) -> list:
    """Run work(i) in `count` threads that stay alive (as a worker's threads do) until the
    caller has looked at what they left; returns (results, release)."""
    results: list = [None] * count
    errors: list = []
    done = threading.Barrier(count + 1)
    release = threading.Event()

    def run(i: int) -> None:
        try:
            results[i] = work(i)
        except BaseException as exc:  # reported by the test
            errors.append(exc)
        done.wait()
        release.wait(30)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(count)]
    for t in threads:
        t.start()
    done.wait(30)

    def finish() -> None:
        release.set()
        for t in threads:
            t.join(30)
        assert not errors, errors

    return results, finish


def request(catalog, work):
    catalog.begin()
    try:
        return work()
    finally:
        catalog.end()


def test_threads_share_one_cache_of_items_and_answers(generated) -> None:
    app, made = generated
    archive = app.extensions["archive"]
    catalog = archive.catalog
    ibis = [g.rep for g in made[:10]]
    baseline = live_items()

    def work(i: int):
        return request(
            catalog,
            lambda: (
                [catalog.lookup(ibi) for ibi in ibis],
                [archive.url_request_body(query(ibi), LINKS) for ibi in ibis],
                catalog.answer_cache(),
            ),
        )

    results, finish = in_threads(work)
    try:
        items = [r[0] for r in results]
        # One decoded item per item, whichever thread read it first.
        assert all(a is b for other in items[1:] for a, b in zip(items[0], other))
        assert all(r[2] is results[0][2] for r in results)
        assert len(results[0][2]) == len(ibis)
        del items, results
        assert live_items() - baseline <= len(ibis)
    finally:
        finish()


def test_the_items_kept_by_all_threads_are_bounded_by_one_cache(generated, monkeypatch) -> None:
    app, made = generated
    catalog = app.extensions["archive"].catalog
    monkeypatch.setattr(catalogmod._Reader, "CACHE", 16)
    baseline = live_items()
    gate = threading.Barrier(THREADS)

    def work(i: int) -> None:
        # Each thread reads its own 8 items: 64 in all, four times the cache.
        request(catalog, lambda: [catalog.lookup(g.rep) for g in made[8 * i : 8 * i + 8]])
        gate.wait(30)
        request(catalog, lambda: None)  # a later request finds the cache over its bound

    _, finish = in_threads(work)
    try:
        assert live_items() - baseline <= catalogmod._Reader.CACHE
    finally:
        finish()


def test_a_request_never_sees_what_another_thread_read_from_a_newer_commit(generated) -> None:
    app, made = generated
    archive = app.extensions["archive"]
    catalog = archive.catalog
    writer = store.Writer(catalog.store)
    first, second = made[1], made[2]
    root = Path(catalog.root)
    opened, committed, finished = threading.Event(), threading.Event(), threading.Event()
    seen: dict = {}

    def old_request() -> None:
        catalog.begin()
        try:
            seen["before"] = catalog.item_at(first.directory).state
            opened.set()
            committed.wait(30)
            # Another thread has read both items and the answer for `second` from the
            # commit; this request, begun before it, still reads its own snapshot.
            seen["first"] = catalog.item_at(first.directory).state
            seen["second"] = catalog.lookup(second.rep).state
            seen["answer"] = archive.url_request_body(query(second.rep), LINKS)
        finally:
            catalog.end()
        seen["after"] = catalog.lookup(second.rep).state
        finished.set()

    thread = threading.Thread(target=old_request)
    thread.start()
    try:
        assert opened.wait(30)
        for g in (first, second):
            sidecar = root / g.directory / "item.yaml"
            sidecar.write_text(sidecar.read_text() + "state: Deleted\n")
        writer.refresh()
        new = request(
            catalog,
            lambda: (
                catalog.item_at(first.directory).state,
                catalog.lookup(second.rep).state,
                archive.url_request_body(query(second.rep), LINKS),
            ),
        )
        assert new[:2] == ("Deleted", "Deleted") and "state Deleted" in new[2]
    finally:
        committed.set()
        thread.join(30)
    assert finished.is_set()
    assert seen["first"] == seen["before"] != "Deleted"
    assert seen["second"] != "Deleted" and "state Deleted" not in seen["answer"]
    assert "state " in seen["answer"]
    assert seen["after"] == "Deleted"


def test_concurrent_eviction_of_kept_answers_raises_nothing(generated, monkeypatch) -> None:
    app, made = generated
    archive = app.extensions["archive"]
    catalog = archive.catalog
    monkeypatch.setattr(archive, "ANSWERS", 1)
    # IBIs held nowhere: their answers cost little to build, so threads meet at eviction.
    ibis = [rep_name(1000 + n) for n in range(97)] + [g.rep for g in made[:3]]
    # Switch threads as often as possible: eviction is a few bytecodes.
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:

        def work(i: int) -> None:
            for n in range(1500):
                ibi = ibis[(i * 7 + n) % len(ibis)]
                request(catalog, lambda ibi=ibi: archive.url_request_body(query(ibi), LINKS))

        _, finish = in_threads(work, 32)
        finish()
    finally:
        sys.setswitchinterval(interval)
    assert len(request(catalog, catalog.answer_cache)) <= archive.ANSWERS


def test_a_rebuilt_index_is_not_read_from_the_cache_of_the_file_it_replaced(
    tmp_path: Path, monkeypatch
) -> None:
    # Both files at the same generation: only which file it is tells their caches apart.
    monkeypatch.setattr(store.secrets, "randbits", lambda bits: 7)
    made = make_collection(tmp_path / "col", 16)
    catalog = (
        create_app(settings_for(tmp_path / "col", tmp_path / "state")).extensions["archive"].catalog
    )
    target = made[5]
    writer = store.Writer(catalog.store)

    def read() -> str:
        return request(catalog, lambda: catalog.lookup(target.rep).state)

    before = in_threads(lambda i: read(), 2)
    try:
        # 7, then the build's commit of the items and its OAI-PMH sweep (index/oai.py).
        assert catalog.store.meta()["generation"] == "9"
        assert before[0] == [before[0][0]] * 2 and before[0][0] != "Deleted"
        sidecar = Path(catalog.root) / target.directory / "item.yaml"
        sidecar.write_text(sidecar.read_text() + "state: Deleted\n")
        writer.rebuild("damaged, say")
        assert catalog.store.meta()["generation"] == "9"  # the premise: the same as before
        assert read() == "Deleted"
        after, finish = in_threads(lambda i: read(), 2)
        finish()
        assert after == ["Deleted", "Deleted"]
    finally:
        before[1]()
