"""The Archive's own pages (issue 18), with WebTest: GET / and the service's about page say what
the Archive is (items by state and contenttype, its resolver and inclusion, when the index was
last brought up to date, the collection's problems, links to the list and the statistics); the
statistics page; every page (the resolver's too) is built on one accessible layout."""

from __future__ import annotations

import fnmatch
import os
import shutil
import sqlite3
import tomllib
from importlib import resources
from urllib.parse import urlencode

import pytest

from archive_service.common import inclusion
from archive_service.protocol import pairs
from archive_service.resolver import config as rconfig
from archive_service.resolver.app import create_resolver_app
from archive_service.web import create_app
from isolation import in_child, shared_tmp
from support import ROOT, SAMPLE, SERVICE, Client, acknowledgment

BROKEN = "iconet.com.br/banon/2013/01.01.00.00"
OAIS = "8JMKD3MGP8W/35MMLL8"


def facts(page) -> dict[str, str]:
    """The page's definition list, term -> description text."""
    return {
        dt.get_text(strip=True): dt.find_next_sibling("dd").get_text(" ", strip=True)
        for dt in page.html.find_all("dt")
    }


@pytest.mark.parametrize("path", ["/", f"/{SERVICE}/about"])
def test_the_archive_page_says_what_it_holds(settings, path):
    client = Client(create_app(settings), "/archive")
    page = client.get(path, status=200)
    assert page.content_type == "text/html"
    text = page.html.get_text(" ", strip=True)
    assert "It holds 15 items." in text
    table = page.html.find("table")
    counts = {
        tuple(td.get_text(strip=True) for td in row.find_all("td")[:2]): row.find_all("td")[2]
        for row in table.tbody.find_all("tr")
    }
    got = {kind: int(cell.get_text()) for kind, cell in counts.items()}
    assert got == {
        ("Copy", "Data"): 1,
        ("Deleted", "Data"): 1,
        ("Original", "Data"): 9,
        ("Original", "Metadata"): 4,
    }
    said = facts(page)
    assert said["Resolver"].startswith("none")
    assert said["Inclusion"].startswith("unknown")
    assert said["Last brought up to date"].endswith("UTC")  # formatted for the locale
    refreshed = page.html.find("dt", string="Last brought up to date").find_next_sibling("dd")
    assert refreshed.time["datetime"].endswith("+00:00")
    links = {a.get_text(strip=True): a["href"] for a in page.html.find_all("a")}
    assert links["List and search the items"] == f"/archive/{SERVICE}/items"
    client.test.get(links["List and search the items"], status=200)
    statistics = page.html.find("dt", string="Statistics").find_next_sibling("dd").a["href"]
    assert statistics == f"/archive/{SERVICE}/statistics"
    client.test.get(statistics, status=200)


def test_the_archive_page_shows_the_inclusion_and_the_collections_problems(settings, collection):
    """Issue 32 point 8: a public page shows the inclusion's state and how many problems,
    not the operator's details: the announcer's instructions, paths, process ids."""
    (collection / BROKEN).mkdir(parents=True)
    (collection / BROKEN / "item.yaml").write_text("state: Lost\n")
    settings = {**settings, "resolver": "https://resolver.example.org/J8LNKB5R7W/3FUQHC5"}
    app = create_app(settings)
    client = Client(app, "")
    instructions = "set registrationkey_file (a file holding the key the operator gave you)"
    inclusion.record(settings["state_dir"], "not-joined", settings["resolver"], instructions)
    store = app.extensions["archive_index"].store
    with sqlite3.connect(store.path) as db:
        db.execute("INSERT OR REPLACE INTO meta VALUES ('indexer', '4242 watching 1700000000')")
    page = client.get("/", status=200)
    said = facts(page)
    assert said["Resolver"] == settings["resolver"]
    assert said["Inclusion"].startswith("not joined (since ")
    assert said["Indexer"].startswith("watching since ")
    text = page.html.get_text(" ", strip=True)
    # Counted only: which and why name paths (test_public_disclosure.py); `check` lists them.
    problems = page.html.find(id="problems").find_next("p").get_text(" ", strip=True)
    assert problems == "1 problem: archive-service check on the Archive's machine lists it."
    for secret in ("registrationkey_file", "4242", BROKEN, "item.yaml", settings["state_dir"]):
        assert secret not in text, secret


def test_the_statistics_page_shows_what_was_counted(settings):
    client = Client(create_app(settings), "")
    got = dict(pairs.parse(client.url_request(OAIS).text))
    ack = acknowledgment(got)
    client.test.get(f"/{SERVICE}?{urlencode(ack)}", status=200)
    page = client.get(f"/{SERVICE}/statistics", status=200)
    assert facts(page)["Counted"] == "1"
    (row,) = page.html.find("caption", string=lambda s: "most accessed" in s).parent.tbody("tr")
    assert row.th.get_text(strip=True) == "sid.inpe.br/mtc-m18@80/2009/07.21.14.43"


def resolver_pages(tmp_path):
    config = rconfig.load(
        options={"resolveribi": "J8LNKB5R7W/3FUQHC5", "state_dir": str(tmp_path / "rstate")},
        environ={},
    )
    resolver = Client(create_resolver_app(config), "")
    return [resolver.get("/", status=200), resolver.get("/8JMKD3MGP8W/35MMLL8", status=503)]


@pytest.fixture
def every_page(settings, tmp_path):
    client = Client(create_app(settings), "")
    paths = [
        "/",
        f"/{SERVICE}/about",
        f"/{SERVICE}/items",
        f"/{SERVICE}/items?q=no-such-thing",
        f"/{SERVICE}/statistics",
        f"/{SERVICE}/filelist/iconet.com.br/banon/2009/09.09.22.01",
        f"/{SERVICE}/metadata/iconet.com.br/banon/2012/03.05.08.15",
    ]
    return [client.get(p, status=200) for p in paths] + resolver_pages(tmp_path)


def test_every_page_has_the_accessible_layout(every_page):
    for page in every_page:
        html = page.html
        where = page.request.path
        assert html.html["lang"] == "en", where
        viewport = html.find("meta", attrs={"name": "viewport"})
        assert viewport is not None and "width=device-width" in viewport["content"], where
        assert html.title.get_text(strip=True), where
        assert len(html.find_all("h1")) == 1, where
        assert len(html.find_all("main")) == 1, where
        skip = html.find("a", class_="skip")
        assert skip["href"] == "#main" and html.find(id="main").name == "main", where
        for nav in html.find_all("nav"):
            assert nav.get("aria-label"), where
        for table in html.find_all("table"):
            assert table.caption or table.get("aria-labelledby"), where
            assert all(th.get("scope") == "col" for th in table.thead("th")), where


@pytest.mark.parametrize("package", ["archive_service.common", "archive_service.resolver"])
def test_the_package_data_ships_the_layout_and_the_resolvers_pages(package):
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    patterns = declared["tool"]["setuptools"]["package-data"][package]
    templates = resources.files(package) / "templates"
    names = [entry.name for entry in templates.iterdir()]
    assert names
    for name in names:
        assert any(fnmatch.fnmatch(f"templates/{name}", p) for p in patterns), name


def test_the_pages_answer_when_the_state_directory_cannot_even_be_looked_into():
    # mod_wsgi as www-data with the default state_dir under a home it cannot enter: the
    # statistics page answered 500 (Path.exists raised PermissionError in stats.report).
    with shared_tmp() as top:
        shutil.copytree(SAMPLE, top / "collection")
        for directory, dirs, files in os.walk(top / "collection"):
            for name in dirs + files:
                os.chmod(os.path.join(directory, name), 0o755)
        (top / "locked").mkdir(mode=0o700)  # root's: the child may not look inside

        def child():
            app = create_app(
                {
                    "collection": str(top / "collection"),
                    "archiveaddress": "archive.example.org",
                    "archiveserviceibi": SERVICE,
                    "resolver": "none",
                    "state_dir": str(top / "locked" / "state"),
                }
            )
            client = Client(app, "")
            statistics = client.get(f"/{SERVICE}/statistics", status=200).text
            health = client.get("/health", status=503).json
            return statistics, health, client.get("/", status=200).status_int

        (statistics, health, home), _ = in_child(child, unprivileged=True)
    # Said to be unreadable, without the path or the error (issue 32: in the log, /health).
    assert "The statistics cannot be read now" in statistics
    assert "Permission denied" not in statistics and str(top) not in statistics
    assert not health["state_dir"]["writable"]
    assert home == 200
