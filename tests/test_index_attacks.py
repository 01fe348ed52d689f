"""Attacks on the index and its watcher with real processes: names that are not UTF-8,
the collection, the state directory and the processes themselves misbehaving."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from archive_service.index import catalog as catalogmod
from archive_service.index import store
from archive_service.testing import wait_until
from serve_process import Process

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="inotify is Linux's")

NEW = "iconet.com.br/banon/2009/05.06.07.08"


def indexer_process(collection: Path, state: Path, log: Path) -> Process:
    return Process(
        ["index", "--watch", "--collection", str(collection), "--state-dir", str(state)], log
    ).start()


def new_item(root: Path, directory: str) -> None:
    (root / directory / "doc").mkdir(parents=True)
    (root / directory / "doc" / "a.pdf").write_bytes(b"%PDF-1.4\n")


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
