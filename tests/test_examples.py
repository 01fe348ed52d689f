"""The seed's reference answers (Examples 7.2, 7.3, 8.1, 8.2), pair for pair.

Names, IBI forms, states and content types are the seed's; timestamps are the seed's too (the
sample's sidecars carry them); URLs are where this Archive publishes the sample's files, and
urlkeys are fresh on every answer.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from archive_service.protocol import answers, pairs
from archive_service.collection import items as index
from archive_service.protocol.answers import Archive, Links, UrlRequest
from conftest import ADDRESS, PLATFORM, SERVICE, Client

from archive_service.web import create_app

COL = f"http://{ADDRESS}/col"
URLKEY = re.compile(r"[0-9]{10,}-[0-9]{10,}")

ID = f"""
archiveaddress {ADDRESS}
ibi.archiveservice {{rep {SERVICE}}}
ibi.platformsoftware {{rep {PLATFORM}}}
"""

EXAMPLE_7_2 = ID + f"""
contenttype Data
contenttype.lastedition Data
contenttype.lastedition.metadata Metadata
contenttype.lastedition.metadata(oai_dc) Metadata
contenttype.metadata Metadata
contenttype.metadata(oai_dc) Metadata
contenttype.metadata.translation Metadata
contenttype.translation(en) Data
contenttype.translation(pt) Data
ibi {{rep sid.inpe.br/mtc-m18@80/2009/07.21.13.23 ibip 8JMKD3MGP8W/35MME4E}}
ibi.lastedition {{rep sid.inpe.br/mtc-m18@80/2009/07.21.13.23 ibip 8JMKD3MGP8W/35MME4E}}
ibi.lastedition.metadata {{rep sid.inpe.br/mtc-m18@80/2009/07.21.13.23.47}}
ibi.lastedition.metadata(oai_dc) {{rep sid.inpe.br/mtc-m18@80/2009/07.21.13.23.47}}
ibi.metadata {{rep sid.inpe.br/mtc-m18@80/2009/07.21.13.23.47}}
ibi.metadata(oai_dc) {{rep sid.inpe.br/mtc-m18@80/2009/07.21.13.23.47}}
ibi.metadata.translation {{rep sid.inpe.br/mtc-m18@80/2009/07.21.13.23.47}}
ibi.translation(en) {{rep sid.inpe.br/mtc-m18@80/2009/07.21.13.23}}
ibi.translation(pt) {{rep sid.inpe.br/mtc-m18@80/2009/08.25.19.43}}
state Original
state.lastedition Original
state.lastedition.metadata Original
state.lastedition.metadata(oai_dc) Original
state.metadata Original
state.metadata(oai_dc) Original
state.metadata.translation Original
state.translation(en) Original
state.translation(pt) Original
timestamp 2009-07-21T13:23:45Z
timestamp.lastedition 2009-07-21T13:23:45Z
timestamp.lastedition.metadata 2014-04-04T17:39:54Z
timestamp.lastedition.metadata(oai_dc) 2014-04-04T17:39:54Z
timestamp.metadata 2014-04-04T17:39:54Z
timestamp.metadata(oai_dc) 2014-04-04T17:39:54Z
timestamp.metadata.translation 2014-04-04T17:39:54Z
timestamp.translation(en) 2009-07-21T13:23:45Z
timestamp.translation(pt) 2011-09-22T14:45:11Z
url {COL}/sid.inpe.br/mtc-m18@80/2009/07.21.13.23/doc/CCSDS%20643.0-B-1.pdf
url.lastedition {COL}/sid.inpe.br/mtc-m18@80/2009/07.21.13.23/doc/CCSDS%20643.0-B-1.pdf
url.lastedition.metadata {COL}/sid.inpe.br/mtc-m18@80/2009/07.21.13.23.47/doc/metadata.html
url.lastedition.metadata(oai_dc) {COL}/sid.inpe.br/mtc-m18@80/2009/07.21.13.23.47/doc/oai_dc.xml
url.metadata {COL}/sid.inpe.br/mtc-m18@80/2009/07.21.13.23.47/doc/metadata.html
url.metadata(oai_dc) {COL}/sid.inpe.br/mtc-m18@80/2009/07.21.13.23.47/doc/oai_dc.xml
url.metadata.translation {COL}/sid.inpe.br/mtc-m18@80/2009/07.21.13.23.47/doc/metadata.html
url.translation(en) {COL}/sid.inpe.br/mtc-m18@80/2009/07.21.13.23/doc/CCSDS%20643.0-B-1.pdf
url.translation(pt) {COL}/sid.inpe.br/mtc-m18@80/2009/08.25.19.43/doc/RTC-07.pdf
urlkey *
"""

EXAMPLE_7_3 = ID + f"""
contenttype.translation(en) Data
contenttype.translation(pt) Data
ibi {{rep sid.inpe.br/mtc-m18@80/2009/07.21.13.23 ibip 8JMKD3MGP8W/35MME4E}}
ibi.translation(en) {{rep sid.inpe.br/mtc-m18@80/2009/07.21.13.23}}
ibi.translation(pt) {{rep sid.inpe.br/mtc-m18@80/2009/08.25.19.43}}
state.translation(en) Original
state.translation(pt) Original
timestamp.translation(en) 2009-07-21T13:23:45Z
timestamp.translation(pt) 2011-09-22T14:45:11Z
url.translation(en) {COL}/sid.inpe.br/mtc-m18@80/2009/07.21.13.23/doc/CCSDS%20643.0-B-1.pdf
url.translation(pt) {COL}/sid.inpe.br/mtc-m18@80/2009/08.25.19.43/doc/RTC-07.pdf
urlkey *
"""

EXAMPLE_8_1 = ID + f"""
contenttype Data
ibi {{rep sid.inpe.br/mtc-m18@80/2009/07.21.14.43 ibip 8JMKD3MGP8W/35MMLL8}}
state Original
timestamp 2009-07-21T14:43:31Z
url {COL}/sid.inpe.br/mtc-m18@80/2009/07.21.14.43/doc/CCSDS%20650.0-B-1.pdf
urlkey *
"""

EXAMPLE_8_2_FIRST = ID + """
ibi {rep sid.inpe.br/mtc-m18@80/2009/07.21.14.43 ibip 8JMKD3MGP8W/35MMLL8}
ibi.nextedition {rep sid.inpe.br/mtc-m18/2012/07.12.18.08}
"""

EXAMPLE_8_2_SECOND = ID + f"""
contenttype.lastedition.metadata(oai_dc) Metadata
ibi {{rep sid.inpe.br/mtc-m18/2012/07.12.18.08 ibip 8JMKD3MGP8W/3C9EP6P}}
ibi.lastedition.metadata(oai_dc) {{rep sid.inpe.br/mtc-m18/2012/07.12.18.08.49}}
state.lastedition.metadata(oai_dc) Original
timestamp.lastedition.metadata(oai_dc) 2014-04-04T17:36:01Z
url.lastedition.metadata(oai_dc) {COL}/sid.inpe.br/mtc-m18/2012/07.12.18.08.49/doc/oai_dc.xml
urlkey *
"""


def expected(text: str) -> list[tuple[str, str]]:
    return sorted(tuple(line.split(" ", 1)) for line in text.strip().splitlines() if line)


def assert_answer(body: str, text: str) -> None:
    """`body` is exactly the expected list (sorted, CRLF) but for a fresh, well-formed urlkey."""
    got = pairs.parse(body)
    assert body == pairs.render(got), "pairs must be sorted by name, one per CRLF line"
    want = expected(text)
    keys = [v for n, v in got if n == "urlkey"]
    assert len(keys) == (1 if ("urlkey", "*") in want else 0)
    assert all(URLKEY.fullmatch(k) for k in keys)
    assert [(n, "*" if n == "urlkey" else v) for n, v in got] == want


def test_example_7_2_montar_lista_de_url(collection):
    """Algorithm 2 over this Archive's whole relation subset, before any filtering."""
    archive = Archive(index.scan(collection), ADDRESS, SERVICE, PLATFORM)
    links = Links(f"http://{ADDRESS}", "/" + SERVICE)
    answer = archive.montar_lista_de_url(UrlRequest("8JMKD3MGP8W/35MME4E"), links)
    assert_answer(pairs.render(answer), EXAMPLE_7_2)


def test_example_7_3_filtered_by_get_translation(client: Client):
    response = client.url_request("8JMKD3MGP8W/35MME4E", verblist="GetTranslation")
    assert response.content_type == "text/plain"
    assert_answer(response.text.replace(f"{ADDRESS}{client.mount}/", f"{ADDRESS}/"), EXAMPLE_7_3)


def test_example_8_1_plain_answer(client: Client):
    response = client.url_request("8JMKD3MGP8W/35MMLL8", ip="172.16.44.200 150.163.68.1")
    assert_answer(response.text.replace(f"{ADDRESS}{client.mount}/", f"{ADDRESS}/"), EXAMPLE_8_1)


def test_example_8_1_filter_drops_what_no_verb_asks(client: Client):
    """35MMLL8 has a next edition, but with no verbs ibi.nextedition is not kept (Ex. 8.1)."""
    names = [n for n, _ in pairs.parse(client.url_request("8JMKD3MGP8W/35MMLL8").text)]
    assert "ibi.nextedition" not in names
    assert not [n for n in names if "." in n and n not in ("ibi.archiveservice", "ibi.platformsoftware")]


@pytest.fixture
def first_edition_only(collection, settings):
    """The Archive of Example 8.2's first answer: the next edition is held elsewhere."""
    for directory in ("sid.inpe.br/mtc-m18/2012/07.12.18.08", "sid.inpe.br/mtc-m18/2012/07.12.18.08.49"):
        shutil.rmtree(collection / directory)
    return Client(create_app(settings), "")


def test_example_8_2_first_answer_when_the_chain_leaves_the_archive(first_edition_only):
    response = first_edition_only.url_request(
        "8JMKD3MGP8W/35MMLL8", verblist="GetLastEdition GetMetadata(oai_dc)")
    assert_answer(response.text, EXAMPLE_8_2_FIRST)


def test_example_8_2_second_answer(client: Client):
    response = client.url_request("sid.inpe.br/mtc-m18/2012/07.12.18.08",
                                  verblist="GetLastEdition GetMetadata(oai_dc)")
    assert_answer(response.text.replace(f"{ADDRESS}{client.mount}/", f"{ADDRESS}/"), EXAMPLE_8_2_SECOND)


def test_example_8_2_in_one_round_when_the_archive_holds_both_editions(client: Client):
    """The sample holds both editions: the Archive follows the chain itself (SPEC §4.1), so the
    first answer already carries the second answer's relation pairs and ibi.nextedition."""
    got = dict(pairs.parse(client.url_request(
        "8JMKD3MGP8W/35MMLL8", verblist="GetLastEdition GetMetadata(oai_dc)").text))
    second = dict(expected(EXAMPLE_8_2_SECOND))
    for name in ("ibi.lastedition.metadata(oai_dc)", "state.lastedition.metadata(oai_dc)",
                 "timestamp.lastedition.metadata(oai_dc)", "contenttype.lastedition.metadata(oai_dc)"):
        assert got[name] == second[name]
    assert got["ibi.nextedition"] == "{rep sid.inpe.br/mtc-m18/2012/07.12.18.08}"
    assert got["url.lastedition.metadata(oai_dc)"].endswith("/2012/07.12.18.08.49/doc/oai_dc.xml")


def test_the_urlkey_is_new_on_every_answer(client: Client):
    keys = {dict(pairs.parse(client.url_request("8JMKD3MGP8W/35MMLL8").text))["urlkey"]
            for _ in range(20)}
    assert len(keys) == 20


def test_every_last_edition_pair_equals_the_plain_pair_without_next_edition(collection):
    """§7.2: an item with no next edition is its own last edition."""
    archive = Archive(index.scan(collection), ADDRESS, SERVICE, PLATFORM)
    links = Links(f"http://{ADDRESS}", "/" + SERVICE)
    answer = dict(archive.montar_lista_de_url(UrlRequest("LK47B6W/362SFKH"), links))
    for name in ("ibi", "url", "state", "timestamp", "contenttype"):
        assert answer[name + ".lastedition"] == answer[name]


def test_answers_module_has_no_web_framework():
    import archive_service.protocol.answers as mod

    source = Path(mod.__file__).read_text(encoding="utf-8")
    assert "flask" not in source.lower() and "werkzeug" not in source.lower()
    assert answers.filtrar_lista_de_url([], answers.Verbs()) == []
