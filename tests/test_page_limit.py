"""Page work is bounded so that the protocol keeps its threads (issue 30, finding 7): while a
worker makes as many pages as `page_concurrency` allows, another page is a 503 with
Retry-After at once, and the protocol, /col/ files and /health are answered as ever.
bench/page_load.py measures it under load (64 clients searching 100,000 items)."""

from __future__ import annotations

import os
import sys
import threading

import pytest

from archive_service import settings as settings_module
from archive_service.testing import wait_until
from archive_service.web import create_app, page_limit
from archive_service.web.page_limit import PageLimit, page_slots, waiting_room
from fronts import FILES_DIR
from support import SERVICE, Client

PAGES = [
    "/",
    f"/{SERVICE}/about",
    f"/{SERVICE}/items?q=banon",
    f"/{SERVICE}/statistics",
    f"/{SERVICE}/filelist/{FILES_DIR}",
    f"/{SERVICE}/r51/status",
]


def limit_of(app) -> PageLimit:
    """The app's page bound, as a page being made holds it."""
    found = app.wsgi_app
    while not isinstance(found, PageLimit):
        found = found.app
    return found


@pytest.fixture
def busy(settings):
    app = create_app({**settings, "page_concurrency": 2})
    limit = limit_of(app)
    for _ in range(2):  # two pages being made
        assert limit.slots.acquire(blocking=False)
    yield Client(app, ""), limit


@pytest.mark.parametrize("path", PAGES)
def test_a_page_past_the_bound_is_a_503_with_retry_after(busy, path):
    client, limit = busy
    got = client.test.get(path, status=503)
    assert got.headers["Retry-After"] == "1"
    assert got.headers["X-Content-Type-Options"] == "nosniff"
    assert "busy" in got.text
    limit.slots.release()  # one page done: the next is made
    assert client.test.get(path).status_int == 200


def test_a_page_waits_a_moment_for_a_slot_while_few_wait(settings, monkeypatch):
    monkeypatch.setattr(page_limit, "WAIT", 30)  # what matters is the order, not the time
    app = create_app({**settings, "page_concurrency": 1, "threads": 4})  # room for one
    limit = limit_of(app)
    client = Client(app, "")
    assert limit.slots.acquire(blocking=False)  # a page being made
    got: list[int] = []
    waiter = threading.Thread(
        target=lambda: got.append(client.test.get(f"/{SERVICE}/items").status_int)
    )
    waiter.start()
    assert wait_until(lambda: limit.room._value == 0, timeout=30)  # the waiter is in
    # The room is full: another page is refused at once, not after WAIT.
    assert client.test.get(f"/{SERVICE}/about", status=503).headers["Retry-After"] == "1"
    limit.slots.release()  # the page is done: the waiter makes its own
    waiter.join()
    assert got == [200]


def test_the_protocol_files_and_health_are_answered_while_pages_are_busy(busy):
    client, _ = busy
    assert client.get(f"/{SERVICE}?servicesubject=inclusionConfirmationRequest").text == (
        "confirmation yes"
    )
    assert client.url_request("8JMKD3MGP8W/35MMLL8").status_int == 200
    assert client.test.get(f"/col/{FILES_DIR}/doc/leiame.txt").status_int == 200
    assert client.test.get("/health").status_int == 200
    assert client.test.get(f"/{SERVICE}/health").status_int == 200


def test_a_page_gives_its_slot_back_even_when_it_fails(settings):
    app = create_app({**settings, "page_concurrency": 1})
    client = Client(app, "")
    for _ in range(3):
        client.test.get(f"/{SERVICE}/metadata/no/such/item", status=404)
        client.test.get(f"/{SERVICE}/statistics?month=never", status=400)
    assert client.test.get(f"/{SERVICE}/items").status_int == 200


def test_pages_made_at_once_never_pass_the_bound(settings):
    app = create_app({**settings, "page_concurrency": 3})
    limit = limit_of(app)
    most, now, lock = [0], [0], threading.Lock()
    inner = limit.app

    def counted(environ, start_response):
        with lock:
            now[0] += 1
            most[0] = max(most[0], now[0])
        try:
            return inner(environ, start_response)
        finally:
            with lock:
                now[0] -= 1

    limit.app = counted
    client = Client(app, "")
    statuses: list[int] = []

    def browse():
        for _ in range(10):
            got = client.test.get(f"/{SERVICE}/items?q=banon", expect_errors=True)
            statuses.append(got.status_int)

    threads = [threading.Thread(target=browse) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert most[0] <= 3 and set(statuses) <= {200, 503} and 200 in statuses


@pytest.mark.parametrize(
    ("setting", "threads", "slots"),
    [(0, 16, 1), (0, 32, 2), (0, 4, 1), (0, 1, 1), (6, 16, 6), (40, 16, 15), (3, 1, 1)],
)
def test_the_bound_leaves_the_protocol_a_thread(setting, threads, slots):
    assert page_slots(setting, threads) == slots
    assert slots + waiting_room(slots, threads) <= max(slots, threads // 2)


def test_page_concurrency_is_a_whole_number(tmp_path):
    options = {"collection": str(tmp_path), "page_concurrency": "-1"}
    with pytest.raises(settings_module.ConfigError, match="page_concurrency"):
        settings_module.load(None, options, {})


@pytest.mark.skipif(sys.platform != "linux", reason="a thread's own nice is Linux's")
def test_pages_are_made_at_a_lower_priority_than_the_protocol(settings):
    app = create_app(settings)
    limit = limit_of(app)
    inner, seen = limit.app, []

    def noted(environ, start_response):
        seen.append(os.getpriority(os.PRIO_PROCESS, threading.get_native_id()))
        return inner(environ, start_response)

    limit.app = noted
    client = Client(app, "")
    mine = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
    client.test.get(f"/{SERVICE}/items?q=banon")
    assert seen == [max(mine, page_limit.PAGE_NICE)]
    assert client.get(f"/{SERVICE}?servicesubject=inclusionConfirmationRequest").status_int == 200
    assert os.getpriority(os.PRIO_PROCESS, threading.get_native_id()) == mine


def test_a_streamed_page_is_read_within_its_slot_on_a_page_thread(settings):
    """A sitemap streams its body: read after the bound's slot was given back, its work ran
    past the bound on a thread of the protocol's priority (found by the adversarial pass)."""
    app = create_app({**settings, "page_concurrency": 1})
    limit = limit_of(app)
    inner, seen = limit.app, []

    def noted(environ, start_response):
        body = inner(environ, start_response)

        def reading():
            for chunk in body:
                free = limit.slots.acquire(blocking=False)
                if free:
                    limit.slots.release()
                priority = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
                seen.append((free, priority))
                yield chunk

        return reading()

    limit.app = noted
    mine = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
    page = Client(app, "").test.get(f"/{SERVICE}/sitemap/0.xml", status=200)
    assert b"<urlset" in page.body
    assert seen and all(s == (False, max(mine, page_limit.PAGE_NICE)) for s in seen), seen
