"""Items whose content lives elsewhere (issue 21): the sidecar key `location` makes the item's
`url` that URL, with the access rules, editions, translations and metadata of a local item;
such an item needs no `doc/`."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import webtest

from archive_service.collection import items as index
from archive_service.collection import sidecar as sidecarmod
from archive_service.stores import stats
from archive_service.web import create_app
from support import SERVICE, pairs_of, url_request

ITEM = "example.org/repo/2020/01.02.03.04"
EDITION = "example.org/repo/2021/01.02.03.04"
META = "example.org/repo/2020/01.02.03.05"
LANDING = "https://repo.example.org/handle/123/45"


def make(collection: Path, directory: str, text: str, files: dict[str, str] | None = None):
    path = collection / directory
    path.mkdir(parents=True)
    (path / "item.yaml").write_text(text)
    for name, content in (files or {}).items():
        (path / "doc").mkdir(exist_ok=True)
        (path / "doc" / name).write_text(content)


@pytest.fixture
def app(collection, settings):
    make(
        collection,
        ITEM,
        f"location: {LANDING}\nlanguage: en\nnextedition: {EDITION}\nmetadata: {META}\n"
        "timestamp: '2020-01-02T03:04:00Z'\n",
    )
    make(collection, EDITION, "location: http://repo.example.org/handle/123/46\n")
    make(
        collection,
        META,
        "contenttype: Metadata\nformats: {oai_dc: dc.xml}\n",
        {"dc.xml": "<oai_dc/>"},
    )
    return webtest.TestApp(create_app(settings))


def test_the_url_is_the_location(app):
    got = pairs_of(url_request(app, ITEM))
    assert got["url"] == LANDING
    assert got["contenttype"] == "Data" and got["state"] == "Original"


def test_relations_of_a_located_item_are_those_of_a_local_one(app):
    got = pairs_of(url_request(app, ITEM, verbs="GetLastEdition"))
    assert got["url.lastedition"] == "http://repo.example.org/handle/123/46"
    got = pairs_of(url_request(app, ITEM, verbs="GetMetadata(oai_dc)"))
    assert got["url.metadata(oai_dc)"].endswith(f"/col/{META}/doc/dc.xml")


def test_a_file_path_names_a_local_file_only(app):
    got = pairs_of(url_request(app, ITEM, filepath="/paper.pdf"))
    assert "url" not in got  # no doc/: no such file here, and no made-up URL elsewhere


def test_the_file_list_page_names_the_location(app):
    page = app.get(f"/{SERVICE}/filelist/{ITEM}")
    assert LANDING in page.text


def test_outside_its_networks_the_metadata_url_is_given(collection, settings):
    make(
        collection,
        ITEM,
        f"location: {LANDING}\naccess: {{networks: [10.0.0.0/8]}}\ndc: {{title: A paper}}\n",
    )
    app = webtest.TestApp(create_app(settings))
    got = pairs_of(url_request(app, ITEM))  # from 192.0.2.1
    assert got["url"] != LANDING and "/metadata/" in got["url"]


@pytest.mark.parametrize(
    "value, why",
    [
        ("ftp://repo.example.org/x", "not an http:// or https:// URL"),
        ("file:///etc/passwd", "not an http:// or https:// URL"),
        ("javascript:alert(1)", "not an http:// or https:// URL"),
        ("https:///nohost", "names no host"),
        ("https://repo.example.org/a b", "blank"),
        ("https://user:pw@repo.example.org/", "user name or password"),
        ("https://repo.example.org:99999/", "is not a URL"),
        ("https://repo.example.org/" + "a" * 3000, "longer than"),
        ("[1, 2]", "is not a URL"),
    ],
)
def test_a_bad_location_is_refused_saying_why(collection, value, why):
    path = collection / ITEM
    path.mkdir(parents=True)
    (path / "item.yaml").write_text(f"location: {value}\n")
    with pytest.raises(sidecarmod.SidecarError) as caught:
        sidecarmod.read(path / "item.yaml")
    assert f"{path / 'item.yaml'}: location: " in str(caught.value)
    assert why in str(caught.value)


def test_check_accepts_a_located_item_without_doc(collection, tmp_path):
    make(collection, ITEM, f"location: {LANDING}\n")
    catalog = index.scan(collection)
    assert catalog.lookup(ITEM).location == LANDING
    assert not [p for p in catalog.problems if ITEM in p.where]
    done = subprocess.run(
        [sys.executable, "-m", "archive_service.cli", "check", str(collection)],
        capture_output=True,
        text=True,
        env={"HOME": str(tmp_path), "PATH": "/usr/bin:/bin"},
    )
    assert ITEM not in done.stdout + done.stderr


def test_an_acknowledgment_of_a_location_counts_for_its_item(app, settings):
    # The resolver sends the user to the location, then acknowledges that URL (Table 6.11):
    # counted under the item whose location it is, as a file of a local item is; claimed for
    # an item that has no such location, it is refused as before.
    def acknowledge(claimed: str) -> None:
        got = pairs_of(
            app.get(
                f"/{SERVICE}",
                params={
                    "servicesubject": "urlRequest",
                    "clientinformation.ipaddress": "192.0.2.1",
                    "parsedibiurl.ibi": ITEM,
                },
            ).text
        )
        params = {
            "servicesubject": "acknowledgment",
            "clientinformation.ipaddress": "192.0.2.1",
            "contenttype": "Data",
            "ibi": claimed,
            "state": "Original",
            "url": got["url"],
            "url.persistent": f"http://urlib.net/{claimed}",
            "urlkey": got["urlkey"],
        }
        app.get(f"/{SERVICE}", params=params)

    acknowledge(ITEM)
    acknowledge(EDITION)
    report = stats.Store(settings["state_dir"]).report()
    assert report["total"] == 1 and report["rejected_by_reason"] == {"unknown": 1}
    assert [i["ibi"] for i in report["items"]] == [ITEM]


@pytest.mark.parametrize(
    "host, why",
    [
        ("127.1", "loopback"),
        ("0x7f.1", "loopback"),
        ("2130706433", "loopback"),
        ("[::ffff:7f00:1]", "loopback"),
        ("a.localhost.", "loopback"),
        ("169.254.169.254", "link-local"),
        ("192.168.0.1", "private"),
    ],
)
def test_check_names_a_location_at_an_internal_address(
    collection, settings, tmp_path, capsys, host, why
):
    # issue 30 §9, eleventh pass: a harvested record's or a depositor's location at the
    # reader's own machine or network was answered and no check said so
    from archive_service.cli import main

    make(collection, ITEM, f"location: http://{host}/cgi-bin/x\n")
    assert main(["check", str(collection), "--state-dir", str(tmp_path / "check")]) == 1
    assert f"warning: {ITEM}/item.yaml: location: " in capsys.readouterr().out
    # allow_internal: the admin's word that readers reach such addresses (an intranet)
    assert (
        main(["check", str(collection), "--state-dir", str(tmp_path / "check"), "--allow-internal"])
        == 0
    )
    assert why in str(sidecarmod.read(collection / ITEM / "item.yaml").warnings)
    answer = pairs_of(url_request(webtest.TestApp(create_app(settings)), ITEM))
    assert answer["url"] == f"http://{host}/cgi-bin/x"  # an intranet Archive's may be meant


def test_a_location_by_name_or_public_address_is_no_warning(collection):
    for n, host in enumerate(("repo.example.org", "8.8.8.8", "[2001:4860::8888]", "10.example")):
        make(collection, f"example.org/repo/2020/01.02.03.{10 + n}", f"location: http://{host}/\n")
        side = sidecarmod.read(collection / f"example.org/repo/2020/01.02.03.{10 + n}/item.yaml")
        assert side.warnings == [], host
