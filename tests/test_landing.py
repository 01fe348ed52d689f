"""Item landing pages (issue 32 points 1, 2, 4, 5), with WebTest and the scholarly web's own
readers: the page and its citation, the other IBI form redirected, a Deleted item's 410
tombstone, content negotiation (bibtexparser, rispy, citeproc-py, extruct read what it gives),
406 and Vary, and the fallback URL of an item with no single file."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import bibtexparser
import extruct
import pytest
import rispy
from citeproc import Citation, CitationItem, CitationStylesBibliography, formatter
from citeproc.source.json import CiteProcJSON

from archive_service.citations import styles
from archive_service.protocol import pairs
from archive_service.web import create_app
from support import ADDRESS, SERVICE, Client

ITEM = "iconet.com.br/banon/2012/03.05.08.15"  # inline Dublin Core, one PDF
DELETED = "iconet.com.br/banon/2010/01.20.11.05"
BOTH = ("sid.inpe.br/mtc-m18/2012/07.12.18.08", "8JMKD3MGP8W/3C9EP6P")  # rep and IBIp
EARLIER = "sid.inpe.br/mtc-m18@80/2009/07.21.14.43"  # its nextedition is BOTH[0]
RESOLVER = "http://urlib.net/J8LNKB5R7W/3FUQHC5"
SEVERAL = "example.org/archive/2026/11.27.10.21"  # files, no target: no single file


def landing(ibi: str) -> str:
    return f"/{SERVICE}/item/{ibi}"


# What an export reads of the item's doc/ while `_reads` is a list (an audit hook cannot be
# removed: one serves the module and notes only when asked).
_reads: list[str] | None = None


def _audit(event: str, args: tuple) -> None:
    if _reads is not None and event in ("open", "os.scandir", "os.listdir") and args:
        if "/doc" in str(args[0]) or isinstance(args[0], int):
            _reads.append(f"{event} {args[0]}")


sys.addaudithook(_audit)


@pytest.fixture
def site(settings, collection: Path) -> Client:
    doc = collection / SEVERAL / "doc"
    doc.mkdir(parents=True)
    (doc / "data.csv").write_text("a,b\n1,2\n")
    (doc / "readme.txt").write_text("x" * 2500)
    (collection / SEVERAL / "item.yaml").write_text(
        'timestamp: "2026-11-27T10:21:00Z"\ndc:\n  title: "Two files & a {brace}"\n'
        "  creator: ['Souza, Maria <https://orcid.org/0000-0002-1825-0097>']\n"
        "  date: '2026-11'\n  type: Dataset\n"
        "  rights: https://creativecommons.org/licenses/by/4.0/\n"
    )
    return Client(create_app({**settings, "resolver": RESOLVER}), "/archive")


def test_the_landing_page_shows_the_item_and_how_to_cite_it(site):
    page = site.get(landing(ITEM), status=200)
    assert page.content_type == "text/html"
    main = page.html.main
    assert main.h1.get_text() == "Apresentação do sistema de resolução de IBI"
    said = {dt.get_text(): dt.find_next_sibling("dd").get_text() for dt in main.find_all("dt")}
    assert said["Creators"] == "Banon, Gerald Jean Francis; Banon, Lise Christine"
    assert said["Date"] == "2012-03-05" and said["Language"] == "pt-BR"
    # The persistent URL, readable without JavaScript, and the copy button it enables.
    assert main.find(id="purl")["value"] == f"http://urlib.net/{ITEM}"
    assert main.find(id="copy").has_attr("hidden")
    (download,) = main.select("a.download")
    assert download["href"] == f"http://{ADDRESS}/archive/col/{ITEM}/doc/apresentacao.pdf"
    assert "application/pdf, 1.2\u00a0kB" in download.parent.get_text()
    cite = main.find("blockquote").get_text()
    assert cite.startswith("Banon, G. J. F., & Banon, L. C. (2012, March 5). Apresentação")
    assert cite.endswith(f"http://urlib.net/{ITEM}")
    exports = {a.get_text(): a["href"] for a in main.find_all("a") if "format=" in a["href"]}
    assert exports["BibTeX"] == "?format=bibtex"
    site.test.get(site.path(landing(ITEM)) + exports["BibTeX"], status=200)


def test_the_portuguese_page_cites_in_portuguese_and_exports_as_before(site):
    """The pt-BR page's APA reference kept "(2012, March 5)" in English: it is said with
    citeproc-py's pt-BR CSL locale's words now; the English page and the machine formats
    (a formatted reference, CSL-JSON) are unchanged."""
    pt = {"Accept-Language": "pt-BR"}
    cite = site.get(landing(ITEM), headers=pt).html.main.find("blockquote").get_text()
    assert cite.startswith("Banon, G. J. F., & Banon, L. C. (2012, março 5). Apresentação")
    english = site.get(landing(ITEM)).html.main.find("blockquote").get_text()
    assert "(2012, March 5)" in english
    exported = site.get(landing(ITEM), headers={**pt, "Accept": "text/x-bibliography"}).text
    assert "(2012, March 5)" in exported
    records = site.get(landing(ITEM) + "?format=csl", headers=pt).json
    assert records == site.get(landing(ITEM) + "?format=csl").json


def test_the_page_links_the_editions_and_both_ibi_forms(site):
    rep, ibip = BOTH
    moved = site.get(landing(ibip), status=301)
    assert moved.location == f"http://{ADDRESS}/archive{landing(rep)}"
    page = site.get(landing(rep), status=200)
    assert f"{rep} · {ibip}" in page.html.find(class_="meta").get_text()
    previous = page.html.find(string=lambda s: s and "Previous edition" in s).find_next("a")
    assert previous.get_text() == EARLIER
    earlier = site.get(landing(EARLIER), status=200).html
    assert earlier.find(string=lambda s: s and "Next edition" in s).find_next("a")["href"] == (
        f"http://{ADDRESS}/archive{landing(rep)}"
    )
    site.get(landing("example.org/none/2026/11.27.10.21"), status=404)


def test_a_deleted_item_is_a_citable_410_tombstone(site):
    page = site.get(landing(DELETED), status=410)
    assert (
        "Removed on Mar 2, 2015, 9:15" in page.html.find(class_="tombstone").get_text()
    )  # for the locale
    assert page.html.find(id="purl")["value"] == f"http://urlib.net/{DELETED}"
    assert f'<http://urlib.net/{DELETED}>; rel="cite-as"' in page.headers["Link"]
    assert not page.html.select("a.download")
    record = site.get(landing(DELETED), headers={"Accept": "application/ld+json"}, status=410)
    assert record.json["creativeWorkStatus"] == "Deleted"


def test_an_item_with_no_single_file_is_answered_with_its_landing_page(site):
    got = dict(pairs.parse(site.url_request(SEVERAL).text))
    assert got["url"] == f"http://{ADDRESS}/archive{landing(SEVERAL)}"
    page = site.get(landing(SEVERAL), status=200)
    assert [a.find_next_sibling(string=True).strip() for a in page.html.select("a.download")] == [
        "data.csv",
        "readme.txt",
    ]


def negotiated(site, ibi: str, accept: str, status: int = 200):
    answer = site.get(landing(ibi), headers={"Accept": accept}, status=status)
    assert "Accept" in answer.headers["Vary"]
    return answer


def test_bibtex_and_ris_read_back_with_their_libraries(site):
    answer = negotiated(site, SEVERAL, "application/x-bibtex")
    assert answer.content_type == "application/x-bibtex"
    library = bibtexparser.parse_string(answer.text)
    assert not library.failed_blocks
    (entry,) = library.entries
    assert entry["title"] == r"Two files \& a \{brace\}"
    assert entry["author"] == "Souza, Maria" and entry["year"] == "2026"
    assert entry["url"] == f"http://urlib.net/{SEVERAL}"
    answer = negotiated(site, ITEM, "application/x-research-info-systems")
    (record,) = rispy.loads(answer.text)
    assert record["title"] == "Apresentação do sistema de resolução de IBI"
    assert record["authors"] == ["Banon, Gerald Jean Francis", "Banon, Lise Christine"]
    assert record["urls"] == [f"http://urlib.net/{ITEM}"]


def test_csl_json_renders_in_citeproc_and_text_bibliography_takes_a_style(site):
    records = negotiated(site, ITEM, "application/vnd.citationstyles.csl+json").json
    bibliography = CitationStylesBibliography(
        styles._style("ieee"), CiteProcJSON(records), formatter.plain
    )
    bibliography.register(Citation([CitationItem(records[0]["id"])]))
    assert "G. J. F. Banon and L. C. Banon" in str(bibliography.bibliography()[0])
    apa = negotiated(site, ITEM, "text/x-bibliography").text
    assert apa.startswith("Banon, G. J. F., & Banon, L. C. (2012, March 5).")
    abnt = site.get(
        landing(ITEM) + "?style=associacao-brasileira-de-normas-tecnicas",
        headers={"Accept": "text/x-bibliography"},
    ).text
    assert abnt.startswith("BANON, G. J. F.; BANON, L. C.")
    site.get(
        landing(ITEM) + "?style=no-such-style",
        headers={"Accept": "text/x-bibliography"},
        status=406,
    )


def test_json_ld_and_highwire_tags_are_in_the_page_as_extruct_reads_them(site):
    page = site.get(landing(SEVERAL), status=200)
    found = extruct.extract(page.text, base_url=page.request.url, syntaxes=["json-ld"])
    (record,) = found["json-ld"]
    assert record["@id"] == f"http://urlib.net/{SEVERAL}" and record["@type"] == "Dataset"
    assert record["author"] == [
        {"@type": "Person", "name": "Souza, Maria", "@id": "https://orcid.org/0000-0002-1825-0097"}
    ]
    assert record["license"] == "https://creativecommons.org/licenses/by/4.0/"
    assert [d["name"] for d in record["distribution"]] == ["data.csv", "readme.txt"]
    assert negotiated(site, SEVERAL, "application/ld+json").json == record
    head = site.get(landing(ITEM)).html.head
    tags = [(m["name"], m["content"]) for m in head.find_all("meta") if m.get("name")]
    assert ("citation_title", "Apresentação do sistema de resolução de IBI") in tags
    assert [c for n, c in tags if n == "citation_author"] == [
        "Banon, Gerald Jean Francis",
        "Banon, Lise Christine",
    ]
    assert ("citation_publication_date", "2012/03/05") in tags
    assert ("citation_pdf_url", f"http://{ADDRESS}/archive/col/{ITEM}/doc/apresentacao.pdf") in tags
    assert head.find("link", rel="cite-as")["href"] == f"http://urlib.net/{ITEM}"


def test_negotiation_defaults_to_html_and_refuses_what_it_cannot_give(site):
    browser = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"
    assert negotiated(site, ITEM, browser).content_type == "text/html"
    assert negotiated(site, ITEM, "*/*").content_type == "text/html"
    assert site.get(landing(ITEM)).content_type == "text/html"  # no Accept at all
    assert negotiated(site, ITEM, "application/xml").text.startswith("<?xml")  # oai_dc
    negotiated(site, ITEM, "image/png", status=406)
    # oai_dc is of the inline Dublin Core: an item without it cannot give it.
    negotiated(site, BOTH[0], "application/xml", status=406)
    site.get(landing(ITEM) + "?format=nothing", status=406)
    assert json.loads(site.get(landing(ITEM) + "?format=csl").text)[0]["type"] == "document"


def test_metadata_cannot_open_an_html_comment_in_the_json_ld_script(settings, collection):
    """A title `<!--<script>` put the JSON-LD script in HTML's double-escaped state: its own
    `</script>` no longer closed it, and a browser took the page down to the copy button's
    script as script text (the title, files and citation gone). No `<` is left in it."""
    name = "example.org/archive/2026/11.27.10.22"
    (collection / name / "doc").mkdir(parents=True)
    (collection / name / "doc" / "a.txt").write_text("a")
    (collection / name / "item.yaml").write_text(
        "dc:\n  title: '<!--<script>'\n  creator: ['A <!-- <script> --> B']\n"
    )
    site = Client(create_app(settings), "")
    head = site.get(landing(name)).html.head
    script = head.find("script", type="application/ld+json").string
    assert "<" not in script
    assert json.loads(script)["name"] == "<!--<script>"


def tiles(collection, name: str, count: int) -> str:
    """An item `name` of `count` one-byte files, tile-0000.tif on: its name."""
    (collection / name / "doc").mkdir(parents=True)
    for n in range(count):
        (collection / name / "doc" / f"tile-{n:04d}.tif").write_text("t")
    (collection / name / "item.yaml").write_text("dc:\n  title: Tiles\n")
    return name


def test_past_100_files_the_page_links_the_file_list(settings, collection):
    """Every file was a row of the page and of its JSON-LD: an item of 20,000 files made a
    view 2.3-2.8 s and 9 MB (issue 30, seventh pass). The file list has them all."""
    name = tiles(collection, "example.org/archive/2026/11.27.10.23", 150)
    site = Client(create_app(settings), "")
    page = site.get(landing(name)).html
    assert len(page.select("a.download")) == 100
    (more,) = [a["href"] for a in page.find_all("a") if a.text == "All the files of this item"]
    assert more.endswith(f"/filelist/{name}")
    record = json.loads(page.find("script", type="application/ld+json").string)
    assert len(record["encoding"]) == 100
    assert site.get_url(more).text.count("tile-") >= 150
    few = site.get(landing(ITEM)).html
    assert not [a for a in few.find_all("a") if a.text == "All the files of this item"]


def test_a_page_cut_at_100_files_says_how_many_it_shows_of_how_many(settings, collection):
    """The list ended with a link to all the files and said nowhere above it that it was cut:
    a reader took the 100 shown for the item's files. Said in the page's language, with
    its plural forms; a list that is not cut says no count, as before."""
    name = tiles(collection, "example.org/archive/2026/11.27.10.24", 131)
    site = Client(create_app(settings), "")
    english = site.get(landing(name)).html.find(id="files-shown")
    assert english.get_text() == "100 of 131 files"
    assert english.find_next("ul")["aria-describedby"] == "files-shown"
    portuguese = site.get(landing(name), headers={"Accept-Language": "pt-BR"}).html
    assert portuguese.find(id="files-shown").get_text() == "100 de 131 arquivos"
    assert site.get(landing(ITEM)).html.find(id="files-shown") is None


@pytest.mark.parametrize("wanted", ["bibtex", "ris", "csl", "bibliography", "oai_dc"])
def test_an_export_naming_no_file_reads_no_directory(settings, wanted):
    """BibTeX, RIS, CSL-JSON, a formatted reference and oai_dc name no file of the item, yet
    each walked its doc/: 0.8-1.3 s for an item of 20,000 files, where another item's takes
    1.4-4.8 ms (issue 30, eighth adversarial pass), and every landing page's Signposting
    points crawlers to them."""
    global _reads
    site = Client(create_app(settings), "")
    site.get(landing(ITEM) + f"?format={wanted}")  # what a first request opens once
    _reads = []
    try:
        answer = site.get(landing(ITEM) + f"?format={wanted}")
        reads = _reads
    finally:
        _reads = None
    assert answer.status_int == 200 and not reads, reads
