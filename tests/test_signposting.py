"""FAIR Signposting (issue 32 point 3) and sitemaps (point 6), read by the `signposting`
client (Link headers, both linkset formats) and by ElementTree: landing pages, /col/ files
and metadata records; the header cut past 20 files; robots.txt, the sitemap index, sitemaps
without Deleted items, split by rows of the index."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from signposting.linkheader import find_signposting_http_link
from signposting.linkset import Linkset, LinksetJSON, _parse_linkset, _parse_linkset_json

from archive_service.testing import ibip_name
from archive_service.web import create_app, sitemaps
from support import ADDRESS, SERVICE, Client

ITEM = "iconet.com.br/banon/2012/03.05.08.15"
DELETED = "iconet.com.br/banon/2010/01.20.11.05"
MANY = "example.org/archive/2026/11.27.10.22"  # 25 files
RESOLVER = "http://urlib.net/J8LNKB5R7W/3FUQHC5"
SITE = f"http://{ADDRESS}"
SITEMAP = "{http://www.sitemaps.org/schemas/sitemap/0.9}"


@pytest.fixture
def site(settings, collection: Path) -> Client:
    doc = collection / MANY / "doc"
    doc.mkdir(parents=True)
    for n in range(25):
        (doc / f"part-{n:02d}.txt").write_text(f"part {n}\n")
    (collection / MANY / "item.yaml").write_text('timestamp: "2026-11-27T10:22:00Z"\n')
    return Client(create_app({**settings, "resolver": RESOLVER}), "")


def signposts(answer):
    return find_signposting_http_link([answer.headers["Link"]], answer.request.url)


def test_a_landing_page_signposts_its_citation_types_formats_and_files(site):
    page = site.get(f"/{SERVICE}/item/{ITEM}")
    found = signposts(page)
    assert str(found.citeAs.target) == f"http://urlib.net/{ITEM}"
    assert {str(t.target) for t in found.types} == {
        "https://schema.org/CreativeWork",
        "https://schema.org/AboutPage",
    }
    (item,) = found.items
    assert str(item.target) == f"{SITE}/col/{ITEM}/doc/apresentacao.pdf"
    assert item.type == "application/pdf"
    described = {str(d.type): str(d.target) for d in found.describedBy}
    assert described["application/x-bibtex"] == f"{SITE}/{SERVICE}/item/{ITEM}?format=bibtex"
    assert described["application/xml"] == f"{SITE}/{SERVICE}/metadata/{ITEM}?format=oai_dc"
    linksets = {str(s.type): str(s.target) for s in found.linksets}
    assert set(linksets) == {"application/linkset", "application/linkset+json"}
    # What each describedby names sends its own cite-as and collection.
    record = site.test.get(described["application/xml"].removeprefix(SITE))
    back = signposts(record)
    assert str(back.citeAs.target) == f"http://urlib.net/{ITEM}"
    assert str(back.collection.target) == f"{SITE}/{SERVICE}/item/{ITEM}"


def test_files_under_col_send_cite_as_and_collection(site):
    answer = site.get(f"/col/{ITEM}/doc/apresentacao.pdf", status=200)
    found = signposts(answer)
    assert str(found.citeAs.target) == f"http://urlib.net/{ITEM}"
    assert str(found.collection.target) == f"{SITE}/{SERVICE}/item/{ITEM}"


def test_both_linksets_are_rfc_9264_and_hold_every_link(site):
    base = f"/{SERVICE}/linkset.json/{MANY}"
    answer = site.get(base, status=200)
    assert answer.content_type == "application/linkset+json"
    assert list(answer.json) == ["linkset"]  # nothing else at the top level
    for context in answer.json["linkset"]:
        assert "anchor" in context
        assert all(isinstance(v, list) for k, v in context.items() if k != "anchor")
    url = SITE + base
    found = _parse_linkset_json(LinksetJSON(answer.text, answer.content_type, url, url))
    landing = f"{SITE}/{SERVICE}/item/{MANY}"
    own = found.for_context(landing)
    assert len(own.items) == 25 and str(own.citeAs.target) == f"http://urlib.net/{MANY}"
    part = found.for_context(f"{SITE}/col/{MANY}/doc/part-24.txt")
    assert str(part.collection.target) == landing
    text = site.get(f"/{SERVICE}/linkset/{MANY}", status=200)
    assert text.content_type == "application/linkset"
    url = f"{SITE}/{SERVICE}/linkset/{MANY}"
    again = _parse_linkset(Linkset(text.text, text.content_type, url, url))
    assert {(s.rel, str(s.target), str(s.context)) for s in again.signposts} == {
        (s.rel, str(s.target), str(s.context)) for s in found.signposts
    }


def test_past_20_files_the_header_keeps_cite_as_type_and_linkset(site):
    found = signposts(site.get(f"/{SERVICE}/item/{MANY}"))
    assert not found.items and not found.describedBy
    assert found.citeAs and len(found.linksets) == 2
    # No dc:type: a CreativeWork (its contenttype Data is no genre: not a Dataset).
    assert {str(t.target) for t in found.types} == {
        "https://schema.org/CreativeWork",
        "https://schema.org/AboutPage",
    }
    head = json.dumps(site.get(f"/{SERVICE}/item/{MANY}").headers["Link"])
    assert len(head) < 2000


@pytest.mark.parametrize(
    ("files", "authors"), [(16, 0), (20, 0), (3, 40)], ids=["16-files", "20-files", "40-orcids"]
)
def test_a_landing_pages_headers_fit_nginxs_default_buffer(settings, collection, files, authors):
    """contrib's nginx holds the status line and headers of an answer in proxy_buffer_size,
    4 KB by default: past it, 502 "upstream sent too big header". 16 files of ordinary names,
    or 40 creators with an ORCID iD, made a 4.2 KB Link header (issue 30, seventh pass: the
    landing pages of such items were 502 through contrib's nginx, 200 from serve)."""
    name = "sid.inpe.br/mtc-m21c/2020/01.02.03.04"
    (collection / name / "doc").mkdir(parents=True)
    for n in range(files):
        (collection / name / "doc" / f"relatorio-final-capitulo-{n:02d}.pdf").write_text("x")
    creators = "".join(
        f"\n  - 'Autor{n}, Nome <https://orcid.org/0000-0002-1825-{n:04d}>'" for n in range(authors)
    )
    (collection / name / "item.yaml").write_text(
        f"dc:\n  title: R\n  creator:{creators or ' []'}\n"
    )
    page = Client(create_app({**settings, "resolver": RESOLVER}), "").get(f"/{SERVICE}/item/{name}")
    sent = len("HTTP/1.1 200 OK\r\n\r\n") + sum(len(k) + len(v) + 4 for k, v in page.headerlist)
    assert sent < 4096 - 512, f"{sent} bytes of status line and headers"
    found = signposts(page)
    assert found.citeAs and len(found.linksets) == 2


def test_robots_names_the_sitemap_index_of_served_landing_pages(site, monkeypatch):
    robots = site.get("/robots.txt").text
    assert f"Sitemap: {SITE}/{SERVICE}/sitemap.xml" in robots.splitlines()
    monkeypatch.setattr(sitemaps, "SITEMAP_ROWS", 4)  # 16 rows: 4 sitemaps
    index = ET.fromstring(site.get(f"/{SERVICE}/sitemap.xml").body)
    locs = [loc.text for loc in index.iter(f"{SITEMAP}loc")]
    assert locs == [f"{SITE}/{SERVICE}/sitemap/{n}.xml" for n in range(4)]
    urls = []
    for loc in locs:
        body = site.test.get(loc.removeprefix(SITE), status=200).body
        some = ET.fromstring(body).findall(f"{SITEMAP}url")
        assert len(some) <= 4
        urls += [(u.find(f"{SITEMAP}loc").text, u.find(f"{SITEMAP}lastmod").text) for u in some]
    pages = [u for u, _ in urls]
    assert len(pages) == len(set(pages)) == 15  # 16 items, the Deleted one left out
    assert f"{SITE}/{SERVICE}/item/{DELETED}" not in pages
    assert (f"{SITE}/{SERVICE}/item/{ITEM}", "2012-03-05") in urls
    site.get(f"/{SERVICE}/sitemap/4.xml", status=404)


def test_a_directory_that_loses_its_claim_is_not_in_the_sitemap(settings, collection):
    """The claim rule decides, as for every answer: an IBIp directory claiming the rep of an
    item filed under its repository name is not served, so not listed."""
    loser = ibip_name(5)
    (collection / loser / "doc").mkdir(parents=True)
    (collection / loser / "doc" / "x.pdf").write_text("x")
    (collection / loser / "item.yaml").write_text(f"rep: {ITEM}\n")
    site = Client(create_app({**settings, "resolver": RESOLVER}), "")
    body = site.get(f"/{SERVICE}/sitemap/0.xml").body
    pages = [loc.text for loc in ET.fromstring(body).iter(f"{SITEMAP}loc")]
    assert pages.count(f"{SITE}/{SERVICE}/item/{ITEM}") == 1
    assert f"{SITE}/{SERVICE}/item/{loser}" not in pages
    assert len(pages) == 14  # the sample's 15 items, the Deleted one left out


def test_a_dc_url_is_one_link_target_in_uri_form(settings, collection):
    """A creator's page or a licence (dc:rights) given as an IRI, or holding `>` and `"`:
    its letters made the Link header not Latin-1, and serve answered the landing page 500
    (gunicorn refused the header, a traceback each view); `>;rel="cite-as",<…` closed the
    target and added a cite-as of the metadata's own (issue 30, eighth adversarial pass)."""
    name = "sid.inpe.br/mtc-m21c/2020/01.02.03.05"
    (collection / name / "doc").mkdir(parents=True)
    (collection / name / "doc" / "a.pdf").write_text("x")
    (collection / name / "item.yaml").write_text(
        "dc:\n  title: R\n  creator: ['Natsume (https://ja.example/夏目漱石)']\n"
        """  rights: ['https://evil.example/>;rel="cite-as",<https://evil.example/x']\n"""
    )
    page = Client(create_app({**settings, "resolver": RESOLVER}), "").get(f"/{SERVICE}/item/{name}")
    page.headers["Link"].encode("ascii")
    found = signposts(page)
    assert str(found.citeAs.target) == f"http://urlib.net/{name}"
    (author,) = found.authors
    assert str(author.target) == "https://ja.example/%E5%A4%8F%E7%9B%AE%E6%BC%B1%E7%9F%B3"
    (license,) = found.license if isinstance(found.license, list) else [found.license]
    assert str(license.target).startswith("https://evil.example/%3E;rel=%22cite-as%22")
