"""Nothing is served from outside an item's doc/ (issue 15): a symlink at doc/ itself, at any
level above a file, or inside doc/ leading out gives 404 on /col/, no URL in an answer, no line
on the file-list page; the indexer neither walks nor watches through it; `check` reports it.
A file whose name holds a control character (CR, LF, ...) gets no URL and no link."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import webtest

from archive_service.cli import main
from archive_service.collection import items as index
from archive_service.protocol import pairs
from archive_service.testing import wait_until
from archive_service.web import create_app
from support import ADDRESS, SERVICE, Client, settings_for

ITEM = "iconet.com.br/banon/2009/09.09.22.01"  # LK47B6W/362SFKH, target @relatorio.pdf
IBIP = "LK47B6W/362SFKH"
OTHER = "dpi.inpe.br/banon/2003/12.10.19.30"


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A directory outside the collection holding secrets, one named like the item's target."""
    place = tmp_path / "outside"
    place.mkdir()
    (place / "secret.txt").write_text("outside the collection\n")
    (place / "@relatorio.pdf").write_text("not the item's report\n")
    return place


def link_doc(collection: Path, item: str, to: Path | str) -> Path:
    doc = collection / item / "doc"
    shutil.rmtree(doc)
    doc.symlink_to(to)
    return doc


def urls(response) -> dict[str, str]:
    assert response.status_int == 200, response.text
    return {n: v for n, v in pairs.parse(response.text) if n == "url" or n.startswith("url.")}


def filelist(client: Client, item: str = ITEM):
    return client.get(f"/{SERVICE}/filelist/{item}", status="*")


# ------------------------------------------------------------------------- doc/ itself


def test_a_doc_linked_out_of_the_collection_serves_nothing(collection, settings, outside):
    link_doc(collection, ITEM, outside)
    client = Client(create_app(settings), "")
    client.get(f"/col/{ITEM}/doc/secret.txt", status=404)
    client.get(f"/col/{ITEM}/doc/@relatorio.pdf", status=404)
    assert urls(client.url_request(IBIP)) == {}
    assert urls(client.url_request(IBIP, filepath="/secret.txt")) == {}
    page = filelist(client)
    assert "secret" not in page.text and "@relatorio" not in page.text


def test_a_doc_linked_to_the_state_dir_does_not_give_out_the_urlkey_secret(collection, settings):
    client = Client(create_app(settings), "")  # makes state_dir/urlkey.secret
    state = Path(settings["state_dir"])
    assert (state / "urlkey.secret").is_file()
    link_doc(collection, ITEM, state)
    client = Client(create_app(settings), "")
    client.get(f"/col/{ITEM}/doc/urlkey.secret", status=404)
    assert urls(client.url_request(IBIP, filepath="/urlkey.secret")) == {}
    assert "urlkey.secret" not in filelist(client).text


def test_a_doc_linked_out_after_indexing_serves_nothing(collection, settings, outside):
    """The index is older than the disk: the rule is applied on the real path when asked."""
    client = Client(create_app(settings), "")
    client.get(f"/col/{ITEM}/doc/@relatorio.pdf", status=200)
    link_doc(collection, ITEM, outside)
    client.get(f"/col/{ITEM}/doc/@relatorio.pdf", status=404)
    client.get(f"/col/{ITEM}/doc/secret.txt", status=404)
    assert urls(client.url_request(IBIP)) == {}
    assert "secret" not in filelist(client).text


def test_a_doc_linked_inside_its_own_item_is_refused_too(collection, settings):
    """The rule is lexical: doc/ must be the real directory, not a link even to a sibling."""
    (collection / ITEM / "doc").rename(collection / ITEM / "v2")
    (collection / ITEM / "doc").symlink_to("v2")
    client = Client(create_app(settings), "")
    client.get(f"/col/{ITEM}/doc/@relatorio.pdf", status=404)


# ------------------------------------------------------------ a level above the file


def test_a_level_above_the_item_linked_out_after_indexing_serves_nothing(
    collection, settings, tmp_path
):
    client = Client(create_app(settings), "")
    copy = tmp_path / "elsewhere"
    shutil.copytree(collection / "iconet.com.br/banon", copy, symlinks=True)
    (copy / "2009/09.09.22.01/doc/secret.txt").write_text("outside the collection\n")
    shutil.rmtree(collection / "iconet.com.br/banon")
    (collection / "iconet.com.br/banon").symlink_to(copy)
    client.get(f"/col/{ITEM}/doc/secret.txt", status=404)
    client.get(f"/col/{ITEM}/doc/@relatorio.pdf", status=404)
    assert urls(client.url_request(IBIP, filepath="/secret.txt")) == {}
    assert "secret" not in filelist(client).text


def test_a_directory_link_inside_doc_leading_out_serves_nothing(collection, settings, outside):
    (collection / ITEM / "doc" / "sub").symlink_to(outside)
    client = Client(create_app(settings), "")
    client.get(f"/col/{ITEM}/doc/sub/secret.txt", status=404)
    assert urls(client.url_request(IBIP, filepath="/sub/secret.txt")) == {}


def test_a_collection_root_that_is_a_symlink_still_serves(collection, settings, tmp_path):
    link = tmp_path / "collection-link"
    link.symlink_to(collection)
    settings["collection"] = str(link)
    client = Client(create_app(settings), "")
    client.get(f"/col/{ITEM}/doc/@relatorio.pdf", status=200)
    assert urls(client.url_request(IBIP))["url"].endswith(f"/col/{ITEM}/doc/@relatorio.pdf")
    assert "reference.bib" in filelist(client).text


# ------------------------------------------------------------------- links inside doc/


META = "sid.inpe.br/mtc-m18/2012/07.12.18.08.49"  # the oai_dc metadata of EDITION
EDITION = "sid.inpe.br/mtc-m18/2012/07.12.18.08"


def test_a_target_or_format_linked_out_gets_no_url_and_is_a_problem(
    collection, settings, outside, capsys
):
    doc = collection / ITEM / "doc"
    (doc / "out.pdf").symlink_to(outside / "secret.txt")
    (doc / "inside.bib").symlink_to("reference.bib")
    (collection / ITEM / "item.yaml").write_text(
        "ibip: LK47B6W/362SFKH\nlanguage: pt\ntarget: out.pdf\n"
    )
    (collection / META / "doc" / "oai_dc.xml").unlink()
    (collection / META / "doc" / "oai_dc.xml").symlink_to(outside / "secret.txt")
    client = Client(create_app(settings), "")
    assert urls(client.url_request(IBIP)) == {}
    assert urls(client.url_request(EDITION, verblist="GetMetadata(oai_dc)")) == {}
    assert "url.metadata" in urls(client.url_request(EDITION, verblist="GetMetadata"))
    client.get(f"/col/{ITEM}/doc/out.pdf", status=404)
    client.get(f"/col/{ITEM}/doc/inside.bib", status=200)  # a link within doc/ stays allowed
    assert "out.pdf" not in filelist(client).text
    assert main(["check", str(collection)]) == 1
    out = capsys.readouterr().out
    assert f"error: {ITEM}: doc/out.pdf is a symbolic link to {outside / 'secret.txt'}" in out
    assert f"error: {META}: doc/oai_dc.xml is a symbolic link to {outside / 'secret.txt'}" in out
    assert "inside.bib" not in out


def test_symlink_loops_serve_nothing_and_are_reported(collection, settings, capsys):
    doc = collection / ITEM / "doc"
    (doc / "loop-a").symlink_to("loop-b")
    (doc / "loop-b").symlink_to("loop-a")
    link_doc(collection, OTHER, "doc")  # doc -> doc
    client = Client(create_app(settings), "")
    client.get(f"/col/{ITEM}/doc/loop-a", status=404)
    client.get(f"/col/{OTHER}/doc/index.html", status=404)
    assert filelist(client, OTHER).status_int in (200, 403)
    assert main(["check", str(collection)]) == 1
    out = capsys.readouterr().out
    assert f"{ITEM}: doc/loop-a is a symbolic link to loop-b" in out
    assert f"{OTHER}: doc is a symbolic link to doc" in out


# ---------------------------------------------------------------------------- check


def test_check_reports_each_link_out_with_its_item_path_and_destination(
    collection, outside, tmp_path, capsys
):
    link_doc(collection, ITEM, outside)
    link_doc(collection, OTHER, tmp_path / "state")
    (collection / "iconet.com.br/banon/2010").rename(tmp_path / "2010")
    (collection / "iconet.com.br/banon/2010").symlink_to(tmp_path / "2010")
    assert main(["check", str(collection)]) == 1
    out = capsys.readouterr().out
    assert f"error: {ITEM}: doc is a symbolic link to {outside}" in out
    assert f"error: {OTHER}: doc is a symbolic link to {tmp_path / 'state'}" in out
    assert f"error: iconet.com.br/banon/2010: is a symbolic link to {tmp_path / '2010'}" in out


# ------------------------------------------------------------------------ the indexer


@pytest.mark.process
def test_the_indexer_neither_walks_nor_watches_through_a_doc_linked_to_a_big_tree(
    collection, tmp_path
):
    big = tmp_path / "big"
    for i in range(400):
        (big / f"d{i:03}").mkdir(parents=True)
        (big / f"d{i:03}" / "file.txt").write_text("x")
    link_doc(collection, ITEM, big)
    app = create_app(settings_for(collection, tmp_path / "state"))
    live = app.extensions["archive_index"]
    live.follow()
    try:
        assert wait_until(
            lambda: any(
                state in live.store.meta().get("indexer", "") for state in ("watching", "polling")
            ),
            timeout=30,
        )
        meta = live.store.meta()
        assert "watching" in meta["indexer"], meta
        assert int(meta["dirs"]) < 100, meta
        page = webtest.TestApp(app).get(f"/{SERVICE}/filelist/{ITEM}")
        assert "file.txt" not in page.text and not page.html.find("tbody").find_all("tr")
    finally:
        live.close()


# ------------------------------------------------------------- control characters


def test_a_file_named_with_cr_lf_gets_no_url_and_no_link(collection, settings, capsys):
    doc = collection / OTHER / "doc"
    for name in list(doc.iterdir()):
        name.unlink()
    (doc / "evil\r\nurl pair.html").write_text("x")  # the only file: the default target
    (collection / ITEM / "doc" / "tab\tname.txt").write_text("x")
    client = Client(create_app(settings), "")
    ibi = index.scan(collection).item_at(OTHER).name.text
    assert not any("evil" in url for url in urls(client.url_request(ibi)).values())
    response = client.url_request(IBIP, filepath="/tab\tname.txt", status="*")
    assert response.status_int == 400 or urls(response) == {}
    for item in (OTHER, ITEM):
        page = filelist(client, item).text
        assert "evil" not in page and "name.txt" not in page and "%0D" not in page.upper()
    client.get(f"/col/{OTHER}/doc/evil%0D%0Aurl%20pair.html", status=404)
    assert main(["check", str(collection)]) == 1
    out = capsys.readouterr().out
    assert "control character" in out


def test_a_file_named_with_a_backslash_is_no_target_and_check_says_so(collection, settings, capsys):
    """/col/ and a filepath refuse a backslash: as the only file of doc/ it was the default
    target, so the answer had no url pair at all (not even the file list), the file-list page
    linked it to a 404, and `check` was silent."""
    doc = collection / OTHER / "doc"
    for name in list(doc.iterdir()):
        name.unlink()
    (doc / "a\\b.pdf").write_text("x")
    client = Client(create_app(settings), "")
    ibi = index.scan(collection).item_at(OTHER).name.text
    # No single file: its landing page (issue 32), which lists its files.
    assert urls(client.url_request(ibi)) == {"url": f"http://{ADDRESS}/{SERVICE}/item/{OTHER}"}
    client.get(f"/col/{OTHER}/doc/a%5Cb.pdf", status=404)
    assert "a%5Cb" not in filelist(client, OTHER).text
    assert main(["check", str(collection)]) == 1
    assert "doc/'a\\\\b.pdf' has a control character or a backslash" in capsys.readouterr().out
