"""The Archive's item list and its counts (issue 18): the index counts items by state and
contenttype in a small table the writer keeps (no walk over 1,000,000 records), and lists them
a page at a time with keyset pagination and a bounded search."""

from __future__ import annotations

import shutil
from collections import Counter
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest

from archive_service import testing
from archive_service.collection import items as itemsmod
from archive_service.index import catalog as catalogmod
from archive_service.index.catalog import StoreCatalog
from archive_service.index.store import Store, Writer
from archive_service.web import create_app
from support import SERVICE, Client

DELETED = "iconet.com.br/banon/2010/01.20.11.05"  # sample_collection's Deleted item
WITH_DC = "iconet.com.br/banon/2012/03.05.08.15"


@pytest.fixture
def generated(tmp_path: Path):
    root = tmp_path / "collection"
    testing.make_collection(root, 300)
    store = Store(root, tmp_path / "state")
    Writer(store).refresh()
    catalog = StoreCatalog(store)
    yield root, store, catalog
    catalog.close()


def served(root: Path) -> dict[str, itemsmod.Item]:
    """What a scan of the collection serves: the oracle."""
    return itemsmod.scan(root).by_directory


def kinds_of(items) -> dict[tuple[str, str], int]:
    return dict(Counter((i.state, i.contenttype) for i in items))


def test_the_kinds_count_what_a_scan_finds_and_follow_changes(generated):
    root, store, catalog = generated
    assert catalog.kinds() == kinds_of(served(root).values())
    first, second, third = sorted(served(root))[:3]
    (root / first / "item.yaml").write_text("state: Deleted\n")
    shutil.rmtree(root / second)
    (root / third / "item.yaml").write_text("state: [not, a, state]\n")  # unreadable
    Writer(store).refresh()
    assert catalog.kinds() == kinds_of(served(root).values())
    assert catalog.kinds()[("Deleted", "Data")] == 1


def pages(catalog: StoreCatalog, **query) -> list[list[str]]:
    """Every page, following `after` from the first one."""
    found, after = [], ""
    while True:
        page = catalog.page(after=after, **query)
        found.append([i.directory for i in page.items])
        if page.after is None:
            return found
        after = page.after


def test_the_pages_hold_every_served_item_once_in_order_both_ways(generated, monkeypatch):
    root, _, catalog = generated
    monkeypatch.setattr(catalogmod, "PAGE_SIZE", 7)
    forward = pages(catalog)
    assert all(len(p) == 7 for p in forward[:-1])
    listed = [d for p in forward for d in p]
    expected = sorted(served(root), key=lambda d: d.replace("/", "\x01"))
    assert listed == expected
    # Back from the last page, by each page's `before`, gives the same pages.
    back, page = [], catalog.page(after=forward[-2][-1])
    while True:
        back.append([i.directory for i in page.items])
        if page.before is None:
            break
        page = catalog.page(before=page.before)
    assert back[::-1] == forward


# What a search finds, page by page: tests/test_item_search.py (issue 34).


def test_the_list_page_links_each_item_and_shows_deleted_ones(settings):
    client = Client(create_app(settings), "/archive")
    page = client.get(f"/{SERVICE}/items", status=200)
    assert page.content_type == "text/html"
    rows = {row.th.get_text(strip=True): row for row in page.html.find("tbody").find_all("tr")}
    assert len(rows) == 15
    deleted = next(r for ibi, r in rows.items() if ibi == DELETED)
    assert "Deleted" in deleted.get_text() and "deleted" in deleted["class"]
    assert deleted.find("a", string="Files") is None  # a tombstone has no files
    dc = rows[WITH_DC]
    links = {a.contents[0].strip(): a["href"] for a in dc.find_all("a")}
    assert links["Files"] == f"http://mtc-m16c.sid.inpe.br/archive/{SERVICE}/filelist/{WITH_DC}"
    assert links["Metadata"] == f"http://mtc-m16c.sid.inpe.br/archive/{SERVICE}/metadata/{WITH_DC}"
    assert "Apresentação do sistema de resolução de IBI" in dc.get_text()
    client.get_url(links["Files"], status=200)
    client.get_url(links["Metadata"], status=200)


def test_the_list_links_persistent_urls_at_the_resolver(settings):
    settings = {**settings, "resolver": "https://resolver.example.org/J8LNKB5R7W/3FUQHC5"}
    page = Client(create_app(settings), "").get(f"/{SERVICE}/items", params={"q": WITH_DC})
    (row,) = page.html.find("tbody").find_all("tr")
    (link,) = [a for a in row.find_all("a") if a.get_text().startswith("Persistent URL")]
    assert link["href"] == f"https://resolver.example.org/{WITH_DC}"


def test_the_list_page_goes_on_by_its_links(settings, monkeypatch):
    monkeypatch.setattr(catalogmod, "PAGE_SIZE", 4)
    client = Client(create_app(settings), "/archive")
    seen, page = [], client.get(f"/{SERVICE}/items", params={"q": "banon"})
    while True:
        seen += [row.th.get_text(strip=True) for row in page.html.find("tbody").find_all("tr")]
        following = page.html.find("a", rel="next")
        if following is None:
            break
        url = urlsplit(following["href"])
        assert url.path == f"/archive/{SERVICE}/items"  # from the mount point
        assert parse_qs(url.query)["q"] == ["banon"]  # the search goes on
        page = client.test.get(following["href"])
    assert len(seen) == len(set(seen)) == 5
    assert all("banon" in ibi for ibi in seen)


def test_the_search_field_is_labelled(settings):
    page = Client(create_app(settings), "").get(f"/{SERVICE}/items")
    field = page.html.find("input", attrs={"name": "q"})
    label = page.html.find("label", attrs={"for": field["id"]})
    assert label is not None and label.get_text(strip=True)
    assert page.html.find("form")["role"] == "search"


def test_ibis_claimed_twice_are_found_and_forgotten_as_the_collection_changes(collection, tmp_path):
    # The conflicts table is kept per batch: count() and the problems read it, not a
    # grouping of every key; a clean build of the same collection holds the same rows.
    store = Store(collection, tmp_path / "state")
    Writer(store).refresh()
    catalog = StoreCatalog(store)
    dup = collection / "8JMKD3MGP8W/35MME4E/doc"
    dup.mkdir(parents=True)
    (dup / "x.txt").write_text("x")
    Writer(store).refresh()
    assert catalog.count() == len(served(collection)) == 15
    claimed = [p for p in catalog.problems if "is also claimed by" in p.message]
    assert [p.where for p in claimed] == ["8JMKD3MGP8W/35MME4E"]
    clean = Store(collection, tmp_path / "clean")
    Writer(clean).refresh()
    assert testing.dump(store) == testing.dump(clean)
    shutil.rmtree(dup.parent)
    Writer(store).refresh()
    assert not [p for p in catalog.problems if "is also claimed by" in p.message]
    assert testing.dump(store)["conflicts"] == []
    catalog.close()


@pytest.mark.parametrize(
    "query",
    [
        {"after": "\x00"},
        {"before": "zzzz", "after": "a"},
        {"before": "%ff/../.."},
        {"q": "%"},
        {"q": "_"},
        {"q": "'; DROP TABLE items; --"},
        {"q": "é" * 500},  # under the 4096-byte query limit, past the 200 characters kept
        {"after": "iconet.com.br/banon/2009/09.09.22.01", "q": "\u0000"},
    ],
)
def test_odd_list_queries_are_answered(settings, query):
    # Nothing of the query reaches SQL but as a bound value; LIKE's wildcards are not used.
    client = Client(create_app(settings), "")
    page = client.get(f"/{SERVICE}/items", params=query, status=200)
    assert page.html.find("h1").get_text() == "Items of the Archive"
    if query.get("q") in ("%", "_"):
        assert "No items match" in page.text
