"""A damaged index file (issue 15): bad pages, a header that is not SQLite's, a stale WAL from
another state of the file. The collection is the truth: a start finds the damage (PRAGMA
quick_check) and rebuilds the index from the collection, and a running service that meets it
(SQLite errors in a worker) has it rebuilt, instead of answering 500 until someone deletes
the file by hand."""

from __future__ import annotations

import os
import shutil
import sqlite3
import time
import urllib.error
from pathlib import Path
from urllib.parse import urlencode

import pytest

from archive_service import testing
from archive_service.index.catalog import StoreCatalog
from archive_service.index.store import Store, Writer
from archive_service.protocol import pairs
from serve_process import Serve, serve_collection
from support import garble_past_first_page

pytestmark = pytest.mark.process

ITEMS = 2000


@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    root = tmp_path_factory.mktemp("generated") / "collection"
    items = testing.make_collection(root, ITEMS)
    return root, [i.rep or i.ibip for i in items[::40]]


def bad_pages(path: Path) -> None:
    size = path.stat().st_size
    with open(path, "r+b") as f:
        for offset in range(size // 4, size, size // 8):
            f.seek(offset)
            f.write(os.urandom(4096))


def bad_header(path: Path) -> None:
    with open(path, "r+b") as f:
        f.write(os.urandom(100))


def stale_wal(path: Path) -> None:
    """The WAL of the same index after it diverged (half its items gone, vacuumed): SQLite
    replays it onto pages laid out otherwise."""
    other = path.with_name("other.sqlite3")
    shutil.copy(path, other)
    conn = sqlite3.connect(other, isolation_level=None)
    conn.execute("PRAGMA journal_mode = DELETE")
    conn.execute("DELETE FROM items WHERE sortkey > 'm'")
    conn.execute("VACUUM")
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA wal_autocheckpoint = 0")
    conn.execute("UPDATE items SET fingerprint = 'x'")
    shutil.copy(f"{other}-wal", f"{path}-wal")
    conn.close()
    for suffix in ("", "-wal", "-shm"):
        Path(f"{other}{suffix}").unlink(missing_ok=True)


DAMAGE = {"bad-pages": bad_pages, "bad-header": bad_header, "stale-wal": stale_wal}


def answers(serve: Serve, ibis: list[str]) -> dict[str, dict[str, str]]:
    """What urlRequest answers for each IBI, without the urlkey (new in each answer)."""
    found = {}
    for ibi in ibis:
        body = serve.get(
            urlencode(
                {
                    "servicesubject": "urlRequest",
                    "clientinformation.ipaddress": "192.0.2.1",
                    "parsedibiurl.ibi": ibi,
                }
            )
        )
        found[ibi] = {k: v for k, v in pairs.parse(body) if k != "urlkey"}
    return found


def index_file(collection: Path, state: Path) -> Path:
    return Store(collection, state).path


@pytest.mark.slow
@pytest.mark.parametrize("damage", DAMAGE)
def test_a_damaged_index_is_rebuilt_by_the_next_start(generated, tmp_path, damage):
    collection, ibis = generated
    state = tmp_path / "state"
    Writer(Store(collection, state)).refresh()
    path = index_file(collection, state)
    catalog = StoreCatalog(Store(collection, state))
    assert all(catalog.lookup(ibi) is not None for ibi in ibis)
    catalog.close()

    DAMAGE[damage](path)
    serve = serve_collection(tmp_path, collection, state)
    try:
        serve.wait_answering(timeout=60)
        deadline = time.monotonic() + 60
        while True:  # a damaged index may be served while its replacement is built
            try:
                if all(answers(serve, ibis).values()):  # each one held, as before
                    break
            except urllib.error.HTTPError:
                pass
            assert time.monotonic() < deadline, serve.log()
            time.sleep(0.2)
        serve.wait_log("rebuilt the index")
        assert f"the index {path} is damaged" in serve.log()
        assert serve.stop() == 0
    finally:
        serve.kill()
    conn = sqlite3.connect(path)
    try:
        assert conn.execute("PRAGMA quick_check").fetchall() == [("ok",)]
    finally:
        conn.close()


@pytest.mark.slow
def test_a_running_service_recovers_from_an_index_damaged_under_it(generated, tmp_path):
    collection, ibis = generated
    state = tmp_path / "state"
    serve = serve_collection(tmp_path, collection, state)
    try:
        serve.wait_answering(timeout=60)
        serve.wait_log("consistency rescan at start")
        before = answers(serve, ibis[:2])  # the rest is first read after the damage
        path = index_file(collection, state)
        garble_past_first_page(path)
        damaged = time.monotonic()
        deadline = damaged + 60
        while True:
            try:
                got = answers(serve, ibis)
                if all(got.values()):
                    break
            except urllib.error.HTTPError:
                pass
            assert time.monotonic() < deadline, serve.log()
            time.sleep(0.2)
        print(f"answered again {time.monotonic() - damaged:.2f} s after the damage")
        assert {ibi: got[ibi] for ibi in before} == before
        serve.wait_log("rebuilt the index")
        log = serve.log()
        assert f"the index {path} is damaged" in log, log
        assert serve.stop() == 0
    finally:
        serve.kill()
