"""The live index: a real inotify observer in the real indexer process keeps the WSGI app's
answers current within a second of each kind of change; bursts end consistent in few waves;
where watching is impossible, periodic rescans take over and say why."""

from __future__ import annotations

import json
import logging
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import webtest

from archive_service.common.processes import child_environment
from archive_service.index import catalog as catalogmod
from archive_service.index import store
from archive_service.indexer import startup, watch
from archive_service.testing import dump, make_collection, wait_until
from archive_service.web import create_app
from serve_process import Process, state_of
from support import pairs_of, settings_for, url_request

LATENCY = 1.0  # seconds from a change on disk to the answers that show it (the bound)
REP = "iconet.com.br/banon/2009/09.09.22.01"
NEW = "iconet.com.br/banon/2009/05.06.07.08"


@pytest.fixture
def live_app(collection: Path, tmp_path: Path) -> Iterator[webtest.TestApp]:
    """The app with its indexer process running and watching (as serve's workers have it)."""
    app = create_app(settings_for(collection, tmp_path / "state"))
    live = app.extensions["archive_index"]
    live.follow()
    try:
        assert wait_until(lambda: "watching" in live.store.meta().get("indexer", ""), timeout=30)
        yield webtest.TestApp(app)
    finally:
        live.close()
    assert live.follower.indexer_pid is None


def seen_within(app: webtest.TestApp, ibi: str, check, verbs: str = "", filepath: str = "") -> bool:
    return wait_until(lambda: check(pairs_of(url_request(app, ibi, verbs, filepath))), LATENCY)


def _new_item(collection: Path) -> None:
    path = collection / NEW
    (path / "doc").mkdir(parents=True)
    (path / "doc" / "new.pdf").write_bytes(b"%PDF-1.4\n")
    (path / "item.yaml").write_text("language: en\ntimestamp: 2024-05-06T07:08:00Z\n")


CHANGES = {
    "new item directory": (
        _new_item,
        NEW,
        "",
        lambda p: p.get("url", "").endswith(f"/col/{NEW}/doc/new.pdf"),
    ),
    "changed item.yaml": (
        lambda c: (c / REP / "item.yaml").write_text(
            "ibip: LK47B6W/362SFKH\ntarget: reference.bib\ntimestamp: 2030-01-02T03:04:05Z\n"
        ),
        REP,
        "",
        lambda p: (
            p.get("url", "").endswith("/doc/reference.bib")
            and p.get("timestamp") == "2030-01-02T03:04:05Z"
        ),
    ),
    "removed item.yaml": (
        lambda c: (c / REP / "item.yaml").unlink(),
        REP,
        "",
        lambda p: (
            "LK47B6W/362SFKH" not in p.get("ibi", "x")
            and p.get("url", "").endswith(f"/item/{REP}")  # no target: its landing page
        ),
    ),
    "renamed item": (
        lambda c: os.rename(c / REP, c / NEW),
        NEW,
        "",
        lambda p: p.get("url", "").endswith(f"/col/{NEW}/doc/@relatorio.pdf"),
    ),
    "renamed item, old name": (lambda c: os.rename(c / REP, c / NEW), REP, "", lambda p: p == {}),
    "removed item": (lambda c: shutil.rmtree(c / REP), "LK47B6W/362SFKH", "", lambda p: p == {}),
    "file added to doc/": (
        lambda c: (c / REP / "doc" / "added.txt").write_text("new\n"),
        REP,
        "/added.txt",
        lambda p: p.get("url", "").endswith("/doc/added.txt"),
    ),
}


@pytest.mark.process
@pytest.mark.slow
@pytest.mark.parametrize("kind", CHANGES)
def test_each_kind_of_change_is_answered_within_a_second(kind, live_app, collection) -> None:
    change, ibi, filepath, shows = CHANGES[kind]
    assert not shows(pairs_of(url_request(live_app, ibi, filepath=filepath)))  # not yet
    change(collection)
    assert seen_within(live_app, ibi, shows, filepath=filepath), kind


@pytest.mark.process
def test_an_ibip_item_appears_and_its_files_follow(live_app, collection) -> None:
    item = collection / "8JMKD3MGP8W" / "2222222"
    (item / "doc").mkdir(parents=True)
    (item / "doc" / "a.txt").write_text("a\n")
    assert seen_within(
        live_app,
        "8jmkd3mgp8w/2222222",
        lambda p: p.get("url", "").endswith("/col/8JMKD3MGP8W/2222222/doc/a.txt"),
    )
    (item / "doc" / "index.html").write_text("<p>b</p>\n")  # now the default target
    assert seen_within(
        live_app, "8JMKD3MGP8W/2222222", lambda p: p.get("url", "").endswith("/doc/index.html")
    )


@pytest.mark.process
def test_timestamp_follows_a_touched_file(live_app, collection) -> None:
    # The item's timestamp comes from its files' times (its sidecar gives none).
    item = collection / "sid.inpe.br/mtc-m18@80/2009/08.25.19.43"
    (item / "item.yaml").write_text(
        "language: pt\ntranslations:\n  en: sid.inpe.br/mtc-m18@80/2009/07.21.13.23\n"
    )
    assert seen_within(
        live_app,
        "sid.inpe.br/mtc-m18@80/2009/08.25.19.43",
        lambda p: p.get("timestamp", "").startswith("20"),
    )
    moment = 2_000_000_000  # 2033-05-18T03:33:20Z
    for file in (item / "doc").iterdir():
        os.utime(file, (moment, moment))
    assert seen_within(
        live_app,
        "sid.inpe.br/mtc-m18@80/2009/08.25.19.43",
        lambda p: p.get("timestamp") == "2033-05-18T03:33:20Z",
    )


@pytest.mark.process
def test_a_collection_swapped_in_place_is_watched_again(live_app, collection, tmp_path) -> None:
    # A deployment that rebuilds the collection beside it and swaps the directories.
    shutil.copytree(collection, tmp_path / "next")
    shutil.rmtree(tmp_path / "next" / REP)
    os.rename(collection, tmp_path / "previous")
    os.rename(tmp_path / "next", collection)
    assert wait_until(lambda: pairs_of(url_request(live_app, REP)) == {}, timeout=5)
    _new_item(collection)  # and the new directory is the one watched
    assert seen_within(live_app, NEW, lambda p: "url" in p)


@pytest.mark.process
def test_a_replaced_indexer_follows_on(live_app, collection) -> None:
    live = live_app.app.extensions["archive_index"]
    first = live.follower.indexer_pid
    os.kill(first, 9)
    assert wait_until(
        lambda: (
            live.follower.indexer_pid not in (None, first)
            and live.store.meta()
            .get("indexer", "")
            .startswith(f"{live.follower.indexer_pid} watching")
        ),
        timeout=30,
    )
    _new_item(collection)
    assert seen_within(live_app, NEW, lambda p: "url" in p)


class InThread:
    """The indexer's work in a thread of the test, to look at how it went."""

    def __init__(self, st: store.Store, **options):
        self.indexer = watch.Indexer(st, **options)
        self.thread = threading.Thread(target=self.indexer.run)

    def __enter__(self) -> watch.Indexer:
        self.thread.start()
        return self.indexer

    def __exit__(self, *exc) -> None:
        self.indexer.stop.set()
        self.thread.join(timeout=30)
        assert not self.thread.is_alive()


@pytest.mark.process
@pytest.mark.slow
def test_a_burst_of_2000_new_items_ends_consistent_in_few_waves(tmp_path: Path) -> None:
    make_collection(tmp_path / "col", 50)
    make_collection(tmp_path / "incoming", 2000, start=50)
    st = store.Store(tmp_path / "col", tmp_path / "state")
    store.Writer(st).refresh()
    with InThread(st) as indexer:
        assert wait_until(lambda: "watching" in st.meta().get("indexer", ""), timeout=30)
        waves = indexer.waves
        started = time.monotonic()
        # Like rsync: whole trees arrive at once (watchdog reports them twice, with no
        # "modified" for files written before their directory was watched).
        for host in sorted(os.listdir(tmp_path / "incoming")):
            shutil.copytree(
                tmp_path / "incoming" / host, tmp_path / "col" / host, dirs_exist_ok=True
            )
        copying = time.monotonic() - started
        expected = dump(_clean(tmp_path / "col", tmp_path / "clean"))
        assert wait_until(lambda: dump(st)["items"] == expected["items"], timeout=60, interval=0.2)
        # At most one wave per debounce interval while the copy lasts (and one after):
        # the number of waves follows the burst's duration, not its 2,000 items.
        waves = indexer.waves - waves
        assert waves <= copying / watch.DEBOUNCE_SECONDS + 3, (waves, copying)
    assert {k: v for k, v in dump(st).items() if k != "meta"} == {
        k: v for k, v in expected.items() if k != "meta"
    }


def test_reading_the_collection_is_no_change(collection: Path, tmp_path: Path) -> None:
    st = store.Store(collection, tmp_path / "state")
    store.Writer(st).refresh()
    with InThread(st) as indexer:
        assert wait_until(lambda: "watching" in st.meta().get("indexer", ""), timeout=30)
        waves = indexer.waves
        for path in collection.rglob("*"):  # opened and closed without writing
            if path.is_file():
                path.read_bytes()
        time.sleep(3 * watch.DEBOUNCE_SECONDS)
        assert indexer.waves == waves
        (collection / REP / "doc" / "leiame.txt").write_text("changed\n")
        assert wait_until(lambda: indexer.waves > waves, timeout=LATENCY)


def _clean(collection: Path, state: Path) -> store.Store:
    clean = store.Store(collection, state)
    store.Writer(clean).refresh()
    return clean


def test_polling_when_asked_says_why_once(collection: Path, tmp_path: Path, caplog) -> None:
    caplog.set_level(logging.INFO, "archive_service")
    app = webtest.TestApp(create_app(settings_for(collection, tmp_path / "state")))
    st = app.app.extensions["archive_index"].store
    with InThread(st, mode="poll", rescan_interval=0.2):
        _new_item(collection)
        assert wait_until(lambda: "url" in pairs_of(url_request(app, NEW)), timeout=5)
        passes = lambda: sum("periodic rescan" in r.message for r in caplog.records)  # noqa: E731
        assert wait_until(lambda: passes() >= 2, timeout=5)
    said = [r.message for r in caplog.records if r.message.startswith("not watching")]
    assert said == [
        f"not watching {collection}: index_watch is poll; rescanning it every 0.2 s instead"
    ]


def test_too_few_inotify_watches_means_polling(
    collection: Path, tmp_path: Path, caplog, monkeypatch
) -> None:
    # The kernel's fs.inotify.max_user_watches, as if set below this collection's size.
    monkeypatch.setattr(watch, "max_user_watches", lambda: 10)
    caplog.set_level(logging.INFO, "archive_service")
    app = webtest.TestApp(create_app(settings_for(collection, tmp_path / "state")))
    st = app.app.extensions["archive_index"].store
    with InThread(st, rescan_interval=0.2):
        assert wait_until(lambda: "polling" in st.meta().get("indexer", ""), timeout=10)
        _new_item(collection)
        assert wait_until(lambda: "url" in pairs_of(url_request(app, NEW)), timeout=5)
    said = [r.message for r in caplog.records if r.message.startswith("not watching")]
    assert len(said) == 1 and "fs.inotify.max_user_watches is 10" in said[0]


@pytest.mark.process
def test_an_overflow_rescans_everything(collection: Path, tmp_path: Path) -> None:
    """A real overflow of the kernel's queue: the indexer process is stopped (SIGSTOP) while
    more events than fs.inotify.max_queued_events arrive, then the item that came last (whose
    events the kernel dropped) is found by the rescan the overflow asks for."""
    indexer = Process(
        [
            "index",
            "--watch",
            "--collection",
            str(collection),
            "--state-dir",
            str(tmp_path / "state"),
        ],
        tmp_path / "indexer.log",
    ).start()
    try:
        indexer.wait_log("watching ")
        limit = int(Path("/proc/sys/fs/inotify/max_queued_events").read_text())
        # Two files in turn: the kernel merges an event only into an identical last one.
        files = [collection / REP / "doc" / name for name in ("reference.bib", "@relatorio.pdf")]
        indexer.proc.send_signal(signal.SIGSTOP)
        try:
            for i in range(limit + 1000):
                os.utime(files[i % 2])
            _new_item(collection)
        finally:
            indexer.proc.send_signal(signal.SIGCONT)
        indexer.wait_log("the inotify queue overflowed: ")
        st = store.Store(collection, tmp_path / "state")
        catalog = catalogmod.StoreCatalog(st)
        try:
            assert wait_until(lambda: catalog.item_at(NEW) is not None, timeout=10)
        finally:
            catalog.close()
        indexer.check_running()
    finally:
        assert indexer.stop() == 0, indexer.text()


def test_the_file_system_type_is_read_from_the_kernel(tmp_path: Path) -> None:
    assert watch.file_system_type("/proc/self") == "proc"
    assert watch.file_system_type(str(tmp_path)) not in (None, "proc")


def test_rescans_that_find_nothing_keep_the_workers_answers(
    collection: Path, tmp_path: Path
) -> None:
    # A rescan that changes nothing writes nothing: workers would otherwise drop every kept
    # answer and item at each one (every rescan_interval when polling).
    app = webtest.TestApp(create_app(settings_for(collection, tmp_path / "state")))
    catalog = app.app.extensions["archive"].catalog
    st = app.app.extensions["archive_index"].store
    probe = sqlite3.connect(st.path)
    before = probe.execute("PRAGMA data_version").fetchone()[0]
    with InThread(st, mode="poll", rescan_interval=0.1) as indexer:
        assert wait_until(lambda: indexer.waves >= 2, timeout=10)
        version = probe.execute("PRAGMA data_version").fetchone()[0]
        answer = url_request(app, REP)
        kept = catalog.answer_cache()
        assert kept
        assert wait_until(lambda: indexer.waves >= 6, timeout=10)
        assert probe.execute("PRAGMA data_version").fetchone()[0] == version
        assert url_request(app, REP) == answer and catalog.answer_cache() is kept
        _new_item(collection)
        assert wait_until(lambda: "url" in pairs_of(url_request(app, NEW)), timeout=5)
        assert catalog.answer_cache() is not kept
    assert version != before  # the indexer's state ("polling") was written once
    probe.close()


@contextmanager
def write_lock_held(st: store.Store, seconds: float = 20) -> Iterator[None]:
    """The index's write lock, held by another process (a lock this process took would be
    inherited, and so held, by what it forks) for at most `seconds`."""
    code = (
        "import sys, time; from archive_service.index.store import Store\n"
        "with Store(sys.argv[1], sys.argv[2]).write_lock():\n"
        "    print('locked', flush=True); time.sleep(float(sys.argv[3]))"
    )
    with subprocess.Popen(
        [sys.executable, "-c", code, str(st.root), str(st.state_dir), str(seconds)],
        stdout=subprocess.PIPE,
        env=child_environment(),
    ) as holder:
        try:
            assert holder.stdout.readline() == b"locked\n"
            yield
        finally:
            holder.kill()


@pytest.mark.process
def test_serve_answers_from_a_complete_index_while_its_early_walk_runs(
    collection: Path, tmp_path: Path, caplog, request
) -> None:
    from archive_service import settings

    caplog.set_level(logging.INFO, logger="archive_service.indexer.startup")
    logger = logging.getLogger("archive_service.indexer.startup")
    handler = logging.FileHandler(tmp_path / "serve.log")  # the forked walk writes here too
    logger.addHandler(handler)
    request.addfinalizer(lambda: (logger.removeHandler(handler), handler.close()))
    config = settings.load(options=settings_for(collection, tmp_path / "state"), environ={})
    first = startup.LiveIndex(config)
    assert first.refresh().read > 0
    first.catalog.close()
    _new_item(collection)  # while the service was stopped
    live = startup.LiveIndex(config)
    with write_lock_held(live.store):  # the early walk cannot finish yet
        startup.refresh_early(config)  # what serve does before importing the server
        started = time.monotonic()
        assert live.refresh() is None  # the forked process's walk stands for this one ...
        assert time.monotonic() - started < 5  # ... and is not waited for
        assert live.catalog.item_at(REP) is not None  # the index as it was left
        assert live.catalog.item_at(NEW) is None
        (pid,) = startup._unwaited
    assert wait_until(lambda: live.catalog.item_at(NEW) is not None, timeout=10)
    assert wait_until(lambda: (startup.reap_early(), not startup._unwaited)[1], timeout=10)
    # Said by the walk itself, in its own process.
    assert "is up to date with the collection: " in (tmp_path / "serve.log").read_text()
    with pytest.raises(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)  # collected: no zombie left
    live.catalog.close()
    again = startup.LiveIndex(config)
    assert again.refresh().read == 0  # later refreshes walk as before, and find nothing new
    again.catalog.close()


@pytest.mark.process
def test_serve_waits_for_its_early_walk_when_there_is_no_index_yet(
    collection: Path, tmp_path: Path
) -> None:
    from archive_service import settings

    config = settings.load(options=settings_for(collection, tmp_path / "state"), environ={})
    startup.refresh_early(config)
    live = startup.LiveIndex(config)
    assert live.refresh() is None  # the forked build stands for this one
    assert live.catalog.item_at(REP) is not None
    assert not startup._unwaited
    live.catalog.close()
    again = startup.LiveIndex(config)
    assert again.refresh().read == 0
    again.catalog.close()


@pytest.mark.process
def test_an_early_walk_stops_when_serve_does(collection: Path, tmp_path: Path) -> None:
    from archive_service import settings

    options = settings_for(collection, tmp_path / "state")
    config = settings.load(options=options, environ={})
    first = startup.LiveIndex(config)
    first.refresh()
    first.catalog.close()
    code = (
        "import json, os, sys; from archive_service import settings\n"
        "from archive_service.indexer import startup\n"
        "config = settings.load(options=json.loads(sys.argv[1]), environ={})\n"
        "startup.refresh_early(config)\n"
        "open(sys.argv[2], 'w').write(str(startup._early.popitem()[1][0])); os._exit(0)"
    )
    with write_lock_held(first.store):  # the walk waits for the lock, still running
        # No pipe to wait on: the walk inherits whatever the stopped process had open.
        subprocess.run(
            [sys.executable, "-c", code, json.dumps(options), tmp_path / "pid"],
            stdout=subprocess.DEVNULL,
            env=child_environment(),
            check=True,
            timeout=10,
        )
        pid = int((tmp_path / "pid").read_text())

        assert wait_until(lambda: state_of(pid) in ("Z", "X", "gone"), timeout=10)
