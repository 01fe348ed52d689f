"""Issue 35: a worker trusts the answers it kept, without looking at their files again, only
while the indexer watches with inotify and has committed all it heard (indexer/vouch.py);
polling, behind or stopped, the files are checked again and a removed one loses its URL
within the promise."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import webtest

from archive_service.index import store
from archive_service.indexer import vouch
from archive_service.testing import wait_until
from archive_service.web import create_app
from support import pairs_of, settings_for, url_request
from test_watch import REP, InThread, write_lock_held

TARGET = REP + "/doc/@relatorio.pdf"


def counted_app(collection: Path, tmp_path: Path) -> tuple[webtest.TestApp, list]:
    """The app, its kept answers due for a look at the disk at every use (CHECK_EVERY 0), and
    the list of the disk checks it makes (the real ones, counted on their way)."""
    app = create_app(settings_for(collection, tmp_path / "state"))
    archive = app.extensions["archive"]
    archive.CHECK_EVERY = 0
    seen: list = []
    check = archive._disk_checks["in-doc"]

    def counted(*arguments):
        seen.append(arguments)
        return check(*arguments)

    archive._disk_checks["in-doc"] = counted
    return webtest.TestApp(app), seen


def checks_of_a_kept_answer(app: webtest.TestApp, seen: list) -> int:
    url_request(app, REP)  # kept now (or already)
    before = len(seen)
    assert pairs_of(url_request(app, REP))["url"].endswith(TARGET)
    return len(seen) - before


def vouched(st: store.Store) -> vouch.Vouched:
    trusted = vouch.Vouched(st)
    assert wait_until(trusted, timeout=10)
    return trusted


def test_a_watching_indexer_is_trusted_and_a_removed_file_still_goes(
    collection: Path, tmp_path: Path
) -> None:
    app, seen = counted_app(collection, tmp_path)
    st = app.app.extensions["archive_index"].store
    with InThread(st, mode="auto") as indexer:
        vouched(st)
        assert indexer._watches is not None  # with inotify
        assert checks_of_a_kept_answer(app, seen) == 0
        (collection / TARGET).unlink()
        # The indexer commits the change: a new generation drops the kept answer.
        assert wait_until(lambda: "url" not in pairs_of(url_request(app, REP)), timeout=5)


def test_a_polling_indexer_is_not_trusted(collection: Path, tmp_path: Path) -> None:
    app, seen = counted_app(collection, tmp_path)
    st = app.app.extensions["archive_index"].store
    with InThread(st, mode="poll", rescan_interval=60) as indexer:
        assert wait_until(lambda: indexer.waves >= 1, timeout=10)
        trusted = vouch.Vouched(st)
        assert not trusted() and not trusted()
        assert checks_of_a_kept_answer(app, seen) > 0
        (collection / TARGET).unlink()
        assert "url" not in pairs_of(url_request(app, REP))


def test_an_indexer_that_stopped_is_not_trusted(collection: Path, tmp_path: Path) -> None:
    app, seen = counted_app(collection, tmp_path)
    st = app.app.extensions["archive_index"].store
    with InThread(st, mode="auto"):
        trusted = vouched(st)
    assert not trusted()
    assert checks_of_a_kept_answer(app, seen) > 0


@pytest.mark.process
def test_an_indexer_behind_loses_the_trust_within_the_promise(
    collection: Path, tmp_path: Path
) -> None:
    # The index's write lock held elsewhere: the indexer hears the removal and cannot commit
    # it, as one stuck in a long wave, or dead. Its last word ages out of TRUST_FOR.
    app, seen = counted_app(collection, tmp_path)
    app.app.extensions["archive"].CHECK_EVERY = 1.0  # as served
    st = app.app.extensions["archive_index"].store
    with InThread(st, mode="auto"):
        trusted = vouched(st)
        url_request(app, REP)
        with write_lock_held(st):
            (collection / TARGET).unlink()
            assert wait_until(lambda: "url" not in pairs_of(url_request(app, REP)), timeout=5)
            assert not trusted()


def test_the_indexer_vouches_only_once_all_it_heard_is_committed(tmp_path: Path) -> None:
    st = store.Store(tmp_path / "collection", tmp_path / "state")
    st.path.parent.mkdir(parents=True)
    tally, trusted = vouch.Tally(vouch.Voucher(st)), vouch.Vouched(st)
    now = time.monotonic()
    tally.heard(0, now - 0.3)  # a read that found nothing: all before it was heard
    tally.done(tally.taking(), watching=True)
    assert trusted()
    tally.heard(2, now - 0.1)  # two changes heard, in the debouncer
    tally.done(tally.taking(), watching=True)
    assert not trusted()
    tally.heard(0, now)
    tally.handed(1)
    tally.done(tally.taking(), watching=True)
    assert not trusted()  # one of them still on its way
    taking = tally.taking()
    tally.handed(1)  # handed while the loop refreshes what it took
    tally.done(taking, watching=True)
    assert not trusted()
    tally.done(tally.taking(), watching=True)
    assert trusted()
    tally.done(tally.taking(), watching=False)  # polling now
    assert not trusted()
    tally.heard(3, now)
    tally.done(tally.walking(), watching=True)  # a full walk covers all heard before it
    assert trusted()
