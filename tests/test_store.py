"""The persistent index (store.py): the same answers as a fresh scan, incremental refreshes,
one-IBI-two-directories and translations resolved across changes, and crash recovery."""

from __future__ import annotations

import errno
import logging
import os
import re
import resource
import shutil
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
import webtest

from archive_service import settings
from archive_service.collection import items as index
from archive_service.index import catalog as catalogmod
from archive_service.index import readers, store, walk, writer
from archive_service.protocol import answers
from archive_service.protocol.verbs import relation_name
from archive_service.testing import dump, make_collection, wait_until
from archive_service.web import create_app
from serve_process import Process
from support import SAMPLE, SERVICE, pairs_of, settings_for, url_request

VERBS = (
    "",
    "GetLastEdition",
    "GetTranslation",
    "GetTranslation(pt-BR)",
    "GetTranslation(en)",
    "GetMetadata",
    "GetMetadata(oai_dc)",
    "GetFileList",
    "GetLastEdition GetMetadata(oai_dc)",
    "GetMetadata GetTranslation",
)


def test_answers_equal_a_fresh_scan(collection: Path, tmp_path: Path) -> None:
    config = settings.load(options=settings_for(collection, tmp_path / "state"), environ={})
    app = webtest.TestApp(create_app(config))
    scanned = index.scan(collection)
    reference = answers.Archive(
        scanned, config.archiveaddress, SERVICE, resolve_file=index.resolve_file
    )
    links = answers.Links("http://archive.example.org", "/" + SERVICE)
    compared = 0
    for item in scanned.by_directory.values():
        for key in item.keys():
            for verbs in VERBS:
                query = {
                    "servicesubject": "urlRequest",
                    "clientinformation.ipaddress": "192.0.2.1",
                    "parsedibiurl.ibi": key.upper(),
                    "parsedibiurl.verblist": verbs,
                }
                expected = re.sub(
                    r"urlkey [0-9-]+(\r\n)?", "", answers.monta_resposta(query, reference, links)
                )
                assert url_request(app, key.upper(), verbs) == expected, (key, verbs)
                # Asked again: the answer kept by the worker, the same but for its urlkey.
                assert url_request(app, key.upper(), verbs) == expected, (key, verbs)
                compared += 1
    assert compared > 100
    catalog = app.app.extensions["archive"].catalog
    assert catalog.languages == scanned.languages
    assert catalog.has_unlanguaged == scanned.has_unlanguaged
    assert catalog.count() == len(scanned.by_directory)


def test_three_settings_are_enough(collection: Path, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    monkeypatch.delenv("STATE_DIRECTORY", raising=False)
    config = settings_for(collection, tmp_path)
    del config["state_dir"]
    app = webtest.TestApp(create_app(config))
    assert "url http://" in url_request(app, "8JMKD3MGP8W/35MME4E")
    assert list((tmp_path / "data" / "archive-service" / "index").glob("collection-*.sqlite3"))


def test_refresh_rereads_only_what_changed(tmp_path: Path) -> None:
    made = make_collection(tmp_path / "col", 60)
    writer = store.Writer(store.Store(tmp_path / "col", tmp_path / "state"))
    first = writer.refresh()
    assert (first.walked, first.read, first.removed) == (60, 60, 0)
    assert writer.refresh().read == 0

    one, two, three, four = (tmp_path / "col" / m.directory for m in made[1:5])
    (one / "item.yaml").write_text("state: Copy\n")
    os.utime(two / "doc" / "part-0.txt", ns=(10**18, 10**18))  # `touch`: a new timestamp
    shutil.rmtree(three)
    (four / "doc" / "new.txt").write_text("added\n")
    again = writer.refresh()
    assert (again.walked, again.read, again.removed) == (59, 3, 1)
    assert dump(writer.store) == dump(_clean_build(tmp_path / "col", tmp_path / "clean"))


def _clean_build(collection: Path, state: Path) -> store.Store:
    clean = store.Store(collection, state)
    store.Writer(clean).refresh()
    return clean


def test_one_ibi_claimed_twice_follows_changes(collection: Path, tmp_path: Path) -> None:
    # An IBIp directory whose sidecar names a repository name already held: both claim it.
    twin = collection / "8JMKD3MGP8W" / "2222222"
    (twin / "doc").mkdir(parents=True)
    (twin / "doc" / "twin.txt").write_text("twin\n")
    (twin / "item.yaml").write_text("rep: iconet.com.br/banon/2009/09.09.22.01\n")
    config = settings_for(collection, tmp_path / "state")
    app = webtest.TestApp(create_app(config))
    scanned = index.scan(collection)
    served = scanned.lookup("iconet.com.br/banon/2009/09.09.22.01").directory
    catalog = app.app.extensions["archive"].catalog
    assert catalog.lookup("iconet.com.br/banon/2009/09.09.22.01").directory == served
    assert {str(p) for p in catalog.problems} == {str(p) for p in scanned.problems}
    # The directory named by the repository name wins, though the other comes first.
    assert served == "iconet.com.br/banon/2009/09.09.22.01"
    assert scanned.problems and catalog.item_at("8JMKD3MGP8W/2222222") is None
    assert "/doc/twin.txt" not in url_request(app, "LK47B6W/362SFKH")

    # The directory served goes: the other claimant is served from the next refresh on.
    shutil.rmtree(collection / served)
    store.Writer(catalog.store).refresh()
    assert catalog.lookup("iconet.com.br/banon/2009/09.09.22.01").directory == "8JMKD3MGP8W/2222222"
    assert "/col/8JMKD3MGP8W/2222222/doc/twin.txt" in url_request(
        app, "iconet.com.br/banon/2009/09.09.22.01"
    )
    assert catalog.problems == []


def test_translations_and_languages_follow_changes(collection: Path, tmp_path: Path) -> None:
    app = webtest.TestApp(create_app(settings_for(collection, tmp_path / "state")))
    catalog = app.app.extensions["archive"].catalog
    writer = store.Writer(catalog.store)
    english = "sid.inpe.br/mtc-m18@80/2009/07.21.13.23"
    portuguese = "sid.inpe.br/mtc-m18@80/2009/08.25.19.43"
    assert "url.translation(en)" in pairs_of(url_request(app, portuguese, "GetTranslation"))

    # A new item in a language nobody held: it joins the relation set and the reverse side.
    new = collection / "sid.inpe.br" / "mtc-m18@80" / "2009" / "12.01.00.00"
    (new / "doc").mkdir(parents=True)
    (new / "doc" / "de.pdf").write_bytes(b"%PDF-1.4\n")
    (new / "item.yaml").write_text(f"language: de\ntranslations:\n  en: {english}\n")
    writer.refresh()
    assert "de" in catalog.languages
    assert "url.translation(de)" in pairs_of(url_request(app, english, "GetTranslation(de)"))
    full = app.app.extensions["archive"].relations
    assert any(relation_name(r) == ".translation(de)" for r in full)

    # It stops declaring it: the reverse side and the language go with it.
    (new / "item.yaml").write_text("language: en\n")
    writer.refresh()
    assert "de" not in catalog.languages
    assert pairs_of(url_request(app, english, "GetTranslation(de)")).keys() <= {
        "archiveaddress",
        "ibi",
        "ibi.archiveservice",
        "ibi.platformsoftware",
    }


def test_a_kept_answer_gets_a_fresh_urlkey_that_vouches_for_its_urls(
    collection: Path, tmp_path: Path
) -> None:
    app = create_app(settings_for(collection, tmp_path / "state"))
    client = webtest.TestApp(app)
    query = {
        "servicesubject": "urlRequest",
        "clientinformation.ipaddress": "192.0.2.1",
        "parsedibiurl.ibi": "8JMKD3MGP8W/35MME4E",
        "parsedibiurl.verblist": "GetTranslation",
    }
    first, second = (pairs_of(client.get("/" + SERVICE, params=query).text) for _ in range(2))
    assert first.pop("urlkey") != second.pop("urlkey")
    assert first == second
    keys = app.extensions["archive"].urlkeys
    got = pairs_of(client.get("/" + SERVICE, params=query).text)
    urls = [v for n, v in got.items() if n.startswith("url.")]
    assert len(urls) == 2
    assert all(keys.verify(got["urlkey"], url).ok for url in urls)
    assert not keys.verify(got["urlkey"], urls[0] + "x").ok
    # A malformed request is refused even when a well-formed one like it was answered.
    client.get("/" + SERVICE, params={**query, "clientinformation.ipaddress": "nobody"}, status=400)


def test_kept_answers_are_bounded_and_evicted_oldest_first(
    collection: Path, tmp_path: Path
) -> None:
    app = create_app(settings_for(collection, tmp_path / "state"))
    client = webtest.TestApp(app)
    archive = app.extensions["archive"]
    archive.ANSWERS = 2
    ibis = ["8JMKD3MGP8W/35MME4E", "8JMKD3MGP8W/35MMLL8", "LK47B6W/362SFKH"]
    first = [url_request(client, ibi) for ibi in ibis]
    cache = archive.catalog.answer_cache()
    assert len(cache) == 2 and not any(ibis[0] in key for key in cache)
    assert [url_request(client, ibi) for ibi in ibis] == first


def test_workers_see_a_commit_at_once_and_within_a_second_without_the_counter(
    collection: Path, tmp_path: Path, caplog
) -> None:
    app = create_app(settings_for(collection, tmp_path / "state"))
    client = webtest.TestApp(app)
    catalog = app.extensions["archive"].catalog
    writer = store.Writer(catalog.store)
    ibi = "iconet.com.br/banon/2009/09.09.22.01"
    sidecar = collection / ibi / "item.yaml"
    original = sidecar.read_text()
    assert pairs_of(url_request(client, ibi))["state"] == "Original"
    sidecar.write_text(original + "state: Copy\n")
    writer.refresh()
    # The counter the commit bumped: the very next request sees it.
    assert pairs_of(url_request(client, ibi))["state"] == "Copy"

    # No counter (it cannot be written): data_version is still read once a second.
    changes = Path(catalog.store.changes_path)
    changes.unlink()
    changes.mkdir()
    sidecar.write_text(original)
    with caplog.at_level(logging.WARNING, logger="archive_service.index.store"):
        writer.refresh()
    assert "workers see changes up to a second later" in caplog.text
    assert wait_until(
        lambda: pairs_of(url_request(client, ibi))["state"] == "Original", timeout=2.5
    )


def test_a_request_reads_one_snapshot(collection: Path, tmp_path: Path) -> None:
    app = create_app(settings_for(collection, tmp_path / "state"))
    catalog = app.extensions["archive"].catalog
    writer = store.Writer(catalog.store)
    sidecar = collection / "iconet.com.br/banon/2009/09.09.22.01/item.yaml"
    catalog.begin()
    before = catalog.item_at("iconet.com.br/banon/2009/09.09.22.01")
    sidecar.write_text(sidecar.read_text() + "state: Copy\n")
    writer.refresh()
    # Inside the snapshot the commit is invisible, even to a look-up never made before.
    assert catalog.item_at("iconet.com.br/banon/2009/09.09.22.01").state == before.state
    assert catalog.lookup("LK47B6W/362SFKH").state == before.state
    catalog.end()
    assert catalog.item_at("iconet.com.br/banon/2009/09.09.22.01").state == "Copy"


def test_an_index_of_another_schema_is_rebuilt(collection: Path, tmp_path: Path) -> None:
    st = _clean_build(collection, tmp_path / "state")
    expected = dump(st)
    conn = sqlite3.connect(st.path)
    conn.execute("UPDATE meta SET value = 'old' WHERE key = 'schema'")
    conn.execute("UPDATE items SET record = NULL")
    conn.commit()
    conn.close()
    assert not st.is_complete()
    assert store.Writer(st).refresh().read == len(expected["items"])
    assert dump(st) == expected


@pytest.mark.process
def test_killed_mid_build_then_restarted_equals_a_clean_build(tmp_path: Path) -> None:
    make_collection(tmp_path / "col", 3000)
    command = [
        "index",
        "--collection",
        str(tmp_path / "col"),
        "--state-dir",
        str(tmp_path / "state"),
    ]
    st = store.Store(tmp_path / "col", tmp_path / "state")

    def committed() -> int:
        if not st.exists():
            return 0
        try:
            conn = sqlite3.connect(f"file:{st.path}?mode=ro", uri=True)
            try:
                return conn.execute("SELECT count(*) FROM items").fetchone()[0]
            finally:
                conn.close()
        except sqlite3.Error:
            return 0

    build = Process(command, tmp_path / "index.log").start()
    try:
        assert wait_until(lambda: committed() > 0, timeout=60, interval=0.005)
        build.proc.send_signal(signal.SIGKILL)
    finally:
        build.proc.wait()
    assert build.proc.returncode == -signal.SIGKILL
    partial = committed()
    assert 0 < partial < 3000 and not st.is_complete()  # it really died in the middle

    assert Process(command, tmp_path / "index.log").start().proc.wait() == 0, build.text()
    assert st.is_complete()
    assert dump(st) == dump(_clean_build(tmp_path / "col", tmp_path / "clean"))


def test_a_long_first_build_logs_its_progress(tmp_path: Path, caplog, monkeypatch) -> None:
    make_collection(tmp_path / "col", 300)
    monkeypatch.setattr(writer, "PROGRESS_SECONDS", 0.0)  # a line per item instead of per 5 s
    caplog.set_level(logging.INFO, "archive_service")
    create_app(settings_for(tmp_path / "col", tmp_path / "state"))
    lines = [r.message for r in caplog.records if r.message.startswith("indexing ")]
    assert len(lines) >= 100
    assert re.fullmatch(
        rf"indexing {tmp_path / 'col'}: \d+ of about 300 items "
        r"\(\d+ items/s, about \d+ s left\)",
        lines[-1],
    ), lines[-1]


def _query_on_a_full_disk(collection: Path, state: Path) -> subprocess.CompletedProcess:
    (collection / "iconet.com.br/banon/2009/09.09.22.01/item.yaml").write_text(
        "ibip: LK47B6W/362SFKH\nstate: Copy\n"
    )

    def no_file_may_grow() -> None:  # as on a full disk (EFBIG instead of ENOSPC)
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (1, 1))

    query = subprocess.run(
        [
            sys.executable,
            "-m",
            "archive_service.cli",
            "query",
            "LK47B6W/362SFKH",
            "--collection",
            str(collection),
            "--state-dir",
            str(state),
            "--archiveaddress",
            "archive.example.org",
            "--archiveserviceibi",
            SERVICE,
        ],
        capture_output=True,
        text=True,
        preexec_fn=no_file_may_grow,
    )
    assert query.returncode == 0, query.stderr
    return query


@pytest.mark.process
def test_an_index_that_cannot_be_written_is_served_as_it_is(
    collection: Path, tmp_path: Path
) -> None:
    st = _clean_build(collection, tmp_path / "state")
    reading = catalogmod.StoreCatalog(st)  # a running worker: the index's shared memory exists
    assert reading.count() == 15
    try:
        query = _query_on_a_full_disk(collection, tmp_path / "state")
    finally:
        reading.close()
    assert "state Original" in query.stdout  # the index as it was
    assert "cannot bring the index" in query.stderr and "up to date" in query.stderr


@pytest.mark.process
def test_with_no_index_possible_the_collection_is_read_into_memory(
    collection: Path, tmp_path: Path
) -> None:
    query = _query_on_a_full_disk(collection, tmp_path / "state")
    assert "state Copy" in query.stdout  # read now
    assert "cannot write the index anywhere" in query.stderr


@pytest.mark.process
def test_index_command_reports_and_refreshes(collection: Path, tmp_path: Path) -> None:
    command = [
        sys.executable,
        "-m",
        "archive_service.cli",
        "index",
        "--collection",
        str(collection),
        "--state-dir",
        str(tmp_path / "state"),
    ]
    first = subprocess.run(command, check=True, capture_output=True, text=True)
    assert re.search(r"\b15 items served; 15 items walked, 15 read, 0 removed", first.stdout)
    shutil.rmtree(collection / "iconet.com.br")
    again = subprocess.run(command, check=True, capture_output=True, text=True)
    assert re.search(
        r"\b\d+ items served; \d+ items walked, 0 read, [1-9]\d* removed", again.stdout
    )


@pytest.mark.parametrize(
    "parts, is_directory, scope",
    [
        ([], True, ""),
        (["sid.inpe.br"], True, "sid.inpe.br"),
        (["sid.inpe.br"], False, None),
        ([".git", "x"], True, None),
        (["8JMKD3MGP8W", "35MME4E", "item.yaml"], False, "8JMKD3MGP8W/35MME4E"),
        (["8JMKD3MGP8W", "35MME4E", "doc", "a", "b.pdf"], False, "8JMKD3MGP8W/35MME4E"),
        (["sid.inpe.br", "mtc-m18", "2012"], True, "sid.inpe.br/mtc-m18/2012"),
        (
            ["sid.inpe.br", "mtc-m18", "2012", "07.12.18.08"],
            True,
            "sid.inpe.br/mtc-m18/2012/07.12.18.08",
        ),
        (
            ["sid.inpe.br", "mtc-m18", "2012", "07.12.18.08", "item.yaml"],
            False,
            "sid.inpe.br/mtc-m18/2012/07.12.18.08",
        ),
        (
            ["sid.inpe.br", "mtc-m18", "2012", "07.12.18.08", "doc", "x.pdf"],
            False,
            "sid.inpe.br/mtc-m18/2012/07.12.18.08",
        ),
        (["sid.inpe.br", "mtc-m18", "2012", "07.12.18.08", "notes.txt"], False, None),
        (["sid.inpe.br", "mtc-m18", "2012", "not-a-time", "item.yaml"], False, None),
    ],
)
def test_a_change_maps_to_the_place_it_can_affect(parts, is_directory, scope) -> None:
    assert walk.scope_of(parts, is_directory) == scope


def test_cover_keeps_outermost_scopes() -> None:
    assert walk.cover(["a/b/c/d", "a/b", "a/bc", "x", "a/b/c"]) == ["a/b", "a/bc", "x"]
    assert walk.cover(["a", ""]) == [""]


@pytest.mark.process
def test_a_first_build_walked_in_parallel_equals_one_walked_in_order(
    tmp_path: Path, monkeypatch, caplog
) -> None:
    col = tmp_path / "col"
    make_collection(col, 400)
    shutil.copytree(SAMPLE, col, dirs_exist_ok=True)  # two-segment items, stray files …
    (col / ".hidden" / "x" / "y" / "z").mkdir(parents=True)
    (col / "stray.txt").write_text("not an item\n")
    serial = _clean_build(col, tmp_path / "serial")  # 400 items: below both thresholds
    monkeypatch.setattr(writer, "PARALLEL_WALK_ITEMS", 100)
    monkeypatch.setattr(writer, "PARALLEL_ITEMS", 100)
    with caplog.at_level(logging.INFO, logger="archive_service.index.store"):
        parallel = _clean_build(col, tmp_path / "parallel")
    assert "processes walk and read it" in caplog.text
    assert dump(parallel) == dump(serial)
    assert len(dump(serial)["items"]) > 400


def _reader_kinds(monkeypatch, threaded: bool) -> None:
    """Reading processes for every first build of 100 items or more; forked where this
    process runs one thread, new Pythons where another thread runs (as under mod_wsgi)."""
    monkeypatch.setattr(writer, "PARALLEL_ITEMS", 100)
    # Whatever threads earlier tests left in this process, the build sees one or two.
    monkeypatch.setattr(readers.threading, "active_count", lambda: 2 if threaded else 1)


def _in_readers(monkeypatch, act) -> None:
    """Have every reading process (never the builder) call `act()` before reading an item."""
    builder, read = os.getpid(), readers.read_item

    def read_item(root, found):
        if os.getpid() != builder:
            act()
        return read(root, found)

    monkeypatch.setattr(readers, "read_item", read_item)


@pytest.mark.process
@pytest.mark.parametrize("threaded", [False, True], ids=["forked", "new-pythons"])
def test_a_first_build_read_by_other_processes_equals_one_read_here(
    tmp_path: Path, monkeypatch, threaded: bool
) -> None:
    col = tmp_path / "col"
    make_collection(col, 450)
    shutil.copytree(SAMPLE, col, dirs_exist_ok=True)
    serial = _clean_build(col, tmp_path / "serial")
    _reader_kinds(monkeypatch, threaded)
    kinds = []
    made = readers._Readers.__init__

    def note(self, *args):
        made(self, *args)
        kinds.extend(type(proc).__name__ for proc in self.procs)

    monkeypatch.setattr(readers._Readers, "__init__", note)
    parallel = _clean_build(col, tmp_path / "parallel")
    assert kinds and set(kinds) == {"Popen" if threaded else "_ForkedReader"}
    assert dump(parallel) == dump(serial)


@pytest.mark.process
def test_a_forked_reader_that_dies_leaves_its_items_to_the_build(
    tmp_path: Path, monkeypatch, caplog
) -> None:
    col = tmp_path / "col"
    make_collection(col, 450)
    serial = _clean_build(col, tmp_path / "serial")
    _reader_kinds(monkeypatch, threaded=False)
    _in_readers(monkeypatch, lambda: os._exit(3))  # as if killed: its chunk comes back unread
    with caplog.at_level(logging.WARNING, logger="archive_service.index.readers"):
        parallel = _clean_build(col, tmp_path / "parallel")
    assert "a reading process" in caplog.text and "died" in caplog.text
    assert dump(parallel) == dump(serial)


@pytest.mark.process
def test_forked_readers_leave_their_parents_signal_handlers_behind(
    tmp_path: Path, monkeypatch
) -> None:
    col = tmp_path / "col"
    make_collection(col, 450)
    _reader_kinds(monkeypatch, threaded=False)
    seen = tmp_path / "seen"
    _in_readers(monkeypatch, lambda: seen.write_text(repr(signal.getsignal(signal.SIGTERM))))
    old = signal.signal(signal.SIGTERM, lambda *_: None)  # as gunicorn's master has one
    try:
        _clean_build(col, tmp_path / "state")
    finally:
        signal.signal(signal.SIGTERM, old)
    assert seen.read_text() == repr(signal.SIG_DFL)


@pytest.mark.parametrize("threaded", [False, True], ids=["forked", "new-pythons"])
def test_a_build_that_cannot_start_its_readers_reads_everything_itself(
    tmp_path: Path, monkeypatch, caplog, threaded: bool
) -> None:
    col = tmp_path / "col"
    make_collection(col, 450)
    serial = _clean_build(col, tmp_path / "serial")
    _reader_kinds(monkeypatch, threaded)
    fds = len(os.listdir("/proc/self/fd"))

    def refused(*args, **kwargs):
        raise OSError(errno.EAGAIN, os.strerror(errno.EAGAIN))

    monkeypatch.setattr(readers.os, "fork", refused)
    monkeypatch.setattr(readers.subprocess, "Popen", refused)
    with caplog.at_level(logging.WARNING, logger="archive_service.index.readers"):
        alone = _clean_build(col, tmp_path / "alone")
    assert "cannot start a reading process" in caplog.text
    assert dump(alone) == dump(serial)
    assert len(os.listdir("/proc/self/fd")) == fds  # no pipe left open
