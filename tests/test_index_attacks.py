"""Attacks on the index and its watcher with real processes: names that are not UTF-8,
the collection, the state directory and the processes themselves misbehaving."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from urllib.parse import urlencode

import pytest

from archive_service.index import catalog as catalogmod
from archive_service.index import store
from archive_service.testing import wait_until
from serve_process import Process, Serve, http_get, serve_collection

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="inotify is Linux's")

NEW = "iconet.com.br/banon/2009/05.06.07.08"


def indexer_process(collection: Path, state: Path, log: Path) -> Process:
    return Process(
        ["index", "--watch", "--collection", str(collection), "--state-dir", str(state)], log
    ).start()


def new_item(root: Path, directory: str) -> None:
    (root / directory / "doc").mkdir(parents=True)
    (root / directory / "doc" / "a.pdf").write_bytes(b"%PDF-1.4\n")


def answer(serve: Serve, ibi: str) -> tuple[int, bytes]:
    """(status, body) of a urlRequest for `ibi`, without its urlkey (new with each answer)."""
    query = urlencode(
        {
            "servicesubject": "urlRequest",
            "parsedibiurl.ibi": ibi,
            "clientinformation.ipaddress": "150.163.2.175",
        }
    )
    status, _, body = http_get(f"{serve.url}?{query}", timeout=10)
    return status, b"\r\n".join(
        line for line in body.split(b"\r\n") if not line.startswith(b"urlkey ")
    )


def shows(st: store.Store, directory: str, within: float) -> bool:
    catalog = catalogmod.StoreCatalog(st)
    try:
        return wait_until(lambda: catalog.item_at(directory) is not None, within)
    finally:
        catalog.close()


@pytest.mark.process
def test_directories_named_in_bytes_that_are_not_utf8_do_not_stop_the_indexer(
    collection: Path, tmp_path: Path
) -> None:
    """A directory whose name is Latin-1 bytes (an old tar, a Windows share) at the levels
    above an item names no item: before, its scope reached SQLite as text with lone
    surrogates, UnicodeEncodeError stopped the indexer, and each event under it did again."""
    indexer = indexer_process(collection, tmp_path / "state", tmp_path / "indexer.log")
    try:
        indexer.wait_log("watching ")
        root = os.fsencode(collection)
        for name in (b"/relat\xf3rios", b"/iconet.com.br/\xe9", b"/iconet.com.br/banon/\xe9"):
            os.mkdir(root + name)
        os.mkdir(root + b"/relat\xf3rios/x")
        new_item(collection, NEW)  # heard after them, and by the same indexer
        assert shows(store.Store(collection, tmp_path / "state"), NEW, within=5)
        indexer.check_running()
        assert "Traceback" not in indexer.text(), indexer.text()
    finally:
        assert indexer.stop() == 0, indexer.text()


def _remove(path: Path) -> None:
    path.unlink()


def _empty(path: Path) -> None:
    os.truncate(path, 0)


def _remove_wal(path: Path) -> None:
    Path(f"{path}-wal").unlink()


LOSSES = {"removed": _remove, "emptied": _empty, "wal removed": _remove_wal}


@pytest.mark.process
@pytest.mark.parametrize("loss", LOSSES)
def test_an_index_file_lost_under_a_running_service_is_rebuilt(
    collection: Path, tmp_path: Path, loss: str
) -> None:
    """`rm` of the index (a cleanup of the state directory), `: > index` or its WAL deleted
    while serving. Before, every answer of a worker was a 500 (`no such table: meta`, `disk
    I/O error`) until a restart, and /health was 503; a change on disk then made an index of
    that change alone, served as if whole (health 200) until the hourly rescan."""
    state = tmp_path / "state"
    serve = serve_collection(tmp_path, collection, state)
    try:
        serve.wait_answering(timeout=60)
        serve.wait_log("consistency rescan at start")
        ibis = [
            "iconet.com.br/banon/2009/09.09.22.01",
            "LK47B6W/362SFKH",
            "dpi.inpe.br/banon/2003/12.10.19.30",
        ]
        before = {ibi: answer(serve, ibi) for ibi in ibis}
        assert all(status == 200 and body for status, body in before.values()), before
        (path,) = (state / "index").glob("*.sqlite3")
        LOSSES[loss](path)
        lost = time.monotonic()
        # Both workers, several threads each: each answer as before, the health check green.
        assert wait_until(
            lambda: (
                all(answer(serve, ibi) == before[ibi] for ibi in ibis * 8)
                and http_get(f"http://{serve.address}/health")[0] == 200
            ),
            timeout=15,
            interval=0.2,
        ), serve.log()
        print(f"{loss}: answered again after {time.monotonic() - lost:.2f} s")
        (collection / NEW.rsplit("/", 1)[0]).mkdir(exist_ok=True)
        new_item(collection, NEW)  # a change after: the index still holds the rest
        assert wait_until(lambda: answer(serve, NEW)[1] != b"", timeout=5), serve.log()
        assert all(answer(serve, ibi) == before[ibi] for ibi in ibis * 8)
        assert store.Store(collection, state).is_complete()
        assert serve.stop() == 0
    finally:
        serve.kill()


def fill(directory: Path) -> Path:
    filler = directory / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        while True:
            os.write(fd, bytes(4096))
    except OSError:
        pass
    finally:
        os.close(fd)
    return filler


@pytest.mark.process
@pytest.mark.slow
def test_a_rebuild_on_a_full_disk_is_tried_again_later_not_every_second(
    collection: Path, tmp_path: Path, small_disk
) -> None:
    """The index removed while its disk is full: the rebuild fails. Before, the indexer tried
    it again at each of its one-second turns, an ERROR line and a walk of the collection
    each time; now after the retry delay, and the index is back once there is room."""
    small_state = small_disk("1m", "state")
    serve = serve_collection(tmp_path, collection, small_state)
    try:
        serve.wait_answering(timeout=60)
        serve.wait_log("consistency rescan at start")
        rep = "iconet.com.br/banon/2009/09.09.22.01"
        before = answer(serve, rep)
        filler = fill(small_state)
        (path,) = (small_state / "index").glob("*.sqlite3")
        path.unlink()
        serve.wait_log("rebuilding it from the collection")
        time.sleep(4)
        assert serve.log().count("rebuilding it from the collection") == 1, serve.log()
        filler.unlink()
        assert wait_until(lambda: answer(serve, rep) == before, timeout=15, interval=0.2), (
            serve.log()
        )
        assert serve.stop() == 0
    finally:
        serve.kill()
