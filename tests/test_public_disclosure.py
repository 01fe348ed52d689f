"""What the public sees of the Archive's machine (issue 30, finding 12): `/`, the about page and
`/health` say counts and states, never a path, a process id, a link target or the exact
version (those are for `archive-service check` and the logs)."""

from __future__ import annotations

import os
import sqlite3

import pytest

from archive_service import __version__
from archive_service.index.store import Store
from archive_service.web import create_app
from support import SERVICE, Client

LINKED = "iconet.com.br/banon/2013/01.01.00.00"
PID = "987654"


@pytest.fixture
def exposed(settings, collection):
    """An Archive whose collection links out (doc/ to /etc) and whose indexer said its pid."""
    (collection / LINKED).mkdir(parents=True)
    os.symlink("/etc", collection / LINKED / "doc")
    app = create_app(settings)
    with sqlite3.connect(Store(settings["collection"], settings["state_dir"]).path) as conn:
        conn.execute("INSERT OR REPLACE INTO meta VALUES ('indexer', ?)", (f"{PID} watching 1",))
    return Client(app, "")


def secrets(settings) -> list[str]:
    return ["/etc", settings["state_dir"], settings["collection"], PID, __version__]


@pytest.mark.parametrize("path", ["/", f"/{SERVICE}/about"])
def test_the_archive_page_counts_problems_without_paths_pids_or_the_version(
    settings, exposed, path
):
    page = exposed.get(path, status=200)
    text = page.html.get_text(" ", strip=True)
    assert "1 problem: archive-service check" in text
    assert "watching since" in text
    for secret in secrets(settings):
        assert secret not in page.text, secret


@pytest.mark.parametrize("path", ["/health", f"/{SERVICE}/health"])
def test_health_says_states_without_paths_or_pids(settings, exposed, path):
    got = exposed.get(path, status=200)
    assert got.json["index"]["indexer"].startswith("watching since")
    assert got.json["state_dir"] == {"writable": True}
    for secret in secrets(settings):
        assert secret not in got.text, secret


def test_health_says_the_state_directory_takes_no_writes_without_naming_it(settings, read_only):
    app = create_app(settings)
    read_only(settings["state_dir"])
    body = Client(app, "").get("/health", status=503).json
    assert "cannot write in the state directory: Read-only file system" in body["problems"]
    assert settings["state_dir"] not in str(body)


def test_the_archive_page_reads_the_problems_once_per_state_of_the_index(settings, exposed):
    """The page made the whole list of problems for its count at each view: 17-20x the page
    with 5,000 items of one problem each, growing with them (issue 30, eighth adversarial
    pass). The count is kept with what the worker read of that state of the index, as its
    items are: a row changed under it by no writer (no new state) is not seen."""
    assert "1 problem: archive-service check" in exposed.get("/").html.get_text(" ", strip=True)
    with sqlite3.connect(Store(settings["collection"], settings["state_dir"]).path) as conn:
        conn.execute(
            "UPDATE items SET problems = (SELECT problems FROM items WHERE problems IS NOT NULL) "
            "WHERE sortkey = (SELECT min(sortkey) FROM items WHERE problems IS NULL)"
        )
    page = exposed.get(f"/{SERVICE}/about", status=200)
    assert "1 problem: archive-service check" in page.html.get_text(" ", strip=True)
