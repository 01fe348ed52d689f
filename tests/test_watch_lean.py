"""The indexer's own inotify layer (issue 22): its watches come from the index and cost a few
bytes each; new directory levels, whole subtrees renamed, moved in or out are each followed
within a second (a real queue overflow and its repair: test_overflow_repair.py)."""

from __future__ import annotations

import os
import shutil
import sys
import threading
import time
import tracemalloc
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from archive_service.index import catalog as catalogmod
from archive_service.index import store
from archive_service.indexer import watch
from archive_service.testing import make_collection, wait_until

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="inotify is Linux's")

LATENCY = 1.0  # the bound, from a change on disk to the index that shows it
REP = "iconet.com.br/banon/2009/09.09.22.01"
QUEUE = Path("/proc/sys/fs/inotify/max_queued_events")


@contextmanager
def indexing(st: store.Store, **options) -> Iterator[watch.Indexer]:
    """The indexer's loop in a thread, watching; stopped at the end."""
    indexer = watch.Indexer(st, **options)
    thread = threading.Thread(target=indexer.run)
    thread.start()
    try:
        assert wait_until(lambda: "watching" in st.meta().get("indexer", ""), timeout=30)
        yield indexer
    finally:
        indexer.stop.set()
        thread.join(timeout=30)
        assert not thread.is_alive()


@pytest.fixture
def indexed(collection: Path, tmp_path: Path) -> store.Store:
    st = store.Store(collection, tmp_path / "state")
    store.Writer(st).refresh()
    return st


def shows(st: store.Store, directory: str, present: bool = True, within: float = LATENCY) -> bool:
    catalog = catalogmod.StoreCatalog(st)
    try:
        return wait_until(lambda: (catalog.item_at(directory) is not None) == present, within)
    finally:
        catalog.close()


def new_item(root: Path, directory: str) -> None:
    (root / directory / "doc").mkdir(parents=True)
    (root / directory / "doc" / "a.pdf").write_bytes(b"%PDF-1.4\n")


def test_new_host_word_and_year_levels_are_followed(indexed: store.Store, collection) -> None:
    with indexing(indexed):
        new_item(collection, "new.example.org/lab/2031/01.02.03.04")
        assert shows(indexed, "new.example.org/lab/2031/01.02.03.04")
        # The levels just made are watched: a second item in each is heard too.
        new_item(collection, "new.example.org/lab/2031/01.02.03.05")
        new_item(collection, "new.example.org/desk/2032/01.02.03.06")
        assert shows(indexed, "new.example.org/lab/2031/01.02.03.05")
        assert shows(indexed, "new.example.org/desk/2032/01.02.03.06")


def test_a_renamed_subtree_is_followed_under_its_new_name(indexed: store.Store, collection):
    host, word, year, name = REP.split("/")
    with indexing(indexed):
        os.rename(collection / host / word / year, collection / host / word / "2040")
        assert shows(indexed, f"{host}/{word}/2040/{name}")
        assert shows(indexed, REP, present=False)
        # Its watches follow it: what changes inside after the rename is heard at the new path.
        new_item(collection, f"{host}/{word}/2040/01.01.01.01")
        assert shows(indexed, f"{host}/{word}/2040/01.01.01.01")
        (collection / "moved.example.org").mkdir()  # a new level, then a word moved into it
        os.rename(collection / host / word, collection / "moved.example.org" / word)
        assert shows(indexed, f"moved.example.org/{word}/2040/{name}")
        new_item(collection, f"moved.example.org/{word}/2040/01.01.01.02")
        assert shows(indexed, f"moved.example.org/{word}/2040/01.01.01.02")


def test_a_subtree_moved_in_is_watched_and_one_moved_out_is_not(
    indexed: store.Store, collection: Path, tmp_path: Path
) -> None:
    outside = tmp_path / "outside"
    new_item(outside, "in.example.org/lab/2031/01.02.03.04")
    host, word, year, name = REP.split("/")
    with indexing(indexed):
        os.rename(outside / "in.example.org", collection / "in.example.org")
        assert shows(indexed, "in.example.org/lab/2031/01.02.03.04")
        new_item(collection, "in.example.org/lab/2031/01.02.03.05")
        assert shows(indexed, "in.example.org/lab/2031/01.02.03.05")
        os.rename(collection / host / word, outside / word)
        assert shows(indexed, REP, present=False)
        # Out of the collection, its old watches name nothing of ours.
        new_item(outside, f"{word}/{year}/01.01.01.01")
        time.sleep(3 * watch.DEBOUNCE_SECONDS)
        assert not shows(indexed, f"{host}/{word}/{year}/01.01.01.01", within=0.1)
        # And back in, under another name, it is followed again.
        os.rename(outside / word, collection / host / "back")
        assert shows(indexed, f"{host}/back/{year}/01.01.01.01")
        new_item(collection, f"{host}/back/{year}/01.01.01.02")
        assert shows(indexed, f"{host}/back/{year}/01.01.01.02")


def test_the_watches_come_from_the_index_at_a_few_bytes_each(tmp_path: Path) -> None:
    """watchdog's observer kept two dictionaries of full paths per watched directory (about
    700 bytes each) and walked the tree to set them; ours reads the index and keeps a parent
    descriptor and a name."""
    make_collection(tmp_path / "col", 3000)
    st = store.Store(tmp_path / "col", tmp_path / "state")
    result = store.Writer(st).refresh()
    indexer = watch.Indexer(st)
    tracemalloc.start()
    try:
        before = tracemalloc.take_snapshot()
        assert indexer._start_watching()
        after = tracemalloc.take_snapshot()
    finally:
        tracemalloc.stop()
        indexer._stop_watching()
    kept = sum(s.size_diff for s in after.compare_to(before, "filename"))
    assert result.dirs > 5000
    assert kept / result.dirs < 64, f"{kept} bytes for {result.dirs} directories"


def test_one_bad_directory_does_not_stop_the_watches(
    indexed: store.Store, collection: Path
) -> None:
    host, word, year, name = REP.split("/")
    with indexing(indexed):
        locked = collection / "locked.example.org" / "lab"
        locked.mkdir(parents=True)
        os.chmod(locked, 0)  # unreadable (for anyone but root): not listed, not watched
        try:
            new_item(collection, f"{host}/{word}/{year}/01.01.01.01")
            assert shows(indexed, f"{host}/{word}/{year}/01.01.01.01")
        finally:
            os.chmod(locked, 0o755)
        shutil.rmtree(collection / host / word / year)
        assert shows(indexed, REP, present=False)


def test_an_item_made_before_the_watches_were_set_is_watched(
    indexed: store.Store, collection: Path
) -> None:
    """The watches come from the index: an item made after the index's last refresh (while
    the service was stopped, or before its parent's watch) is found by the walk at start,
    then watched, so what changes in it later is heard too."""
    host, word, year, name = REP.split("/")
    made = f"{host}/{word}/{year}/01.01.01.01"
    new_item(collection, made)
    new_item(collection, "early.example.org/lab/2031/01.02.03.04")
    with indexing(indexed):
        assert shows(indexed, made, within=10)
        time.sleep(3 * watch.DEBOUNCE_SECONDS)
        (collection / made / "item.yaml").write_text("state: Deleted\n")
        (collection / "early.example.org" / "desk" / "2032" / "01.02.03.05" / "doc").mkdir(
            parents=True
        )
        (collection / "early.example.org/desk/2032/01.02.03.05/doc/a.pdf").write_bytes(b"%PDF")

        def deleted() -> bool:
            catalog = catalogmod.StoreCatalog(indexed)
            try:
                item = catalog.item_at(made)
                return item is not None and item.state == "Deleted"
            finally:
                catalog.close()

        assert wait_until(deleted, LATENCY)
        assert shows(indexed, "early.example.org/desk/2032/01.02.03.05")
