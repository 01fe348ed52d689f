"""The seed's reference answers (Examples 7.2, 7.3, 8.1, 8.2), pair for pair.

Names, IBI forms, states and content types are the seed's; timestamps are the seed's too (the
sample's sidecars carry them); URLs are where this Archive publishes the sample's files, and
urlkeys are fresh on every answer.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from archive_service.collection import items as index
from archive_service.protocol import answers, pairs
from archive_service.protocol.answers import Archive, Links, UrlRequest
from archive_service.web import create_app
from support import (
    ADDRESS,
    EXAMPLE_7_2,
    EXAMPLE_7_3,
    EXAMPLE_8_1,
    EXAMPLE_8_2_FIRST,
    EXAMPLE_8_2_SECOND,
    PLATFORM,
    SERVICE,
    Client,
    assert_answer,
    expected,
)


def test_example_7_2_montar_lista_de_url(collection):
    """Algorithm 2 over this Archive's whole relation subset, before any filtering."""
    archive = Archive(
        index.scan(collection), ADDRESS, SERVICE, PLATFORM, resolve_file=index.resolve_file
    )
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
    assert not [
        n for n in names if "." in n and n not in ("ibi.archiveservice", "ibi.platformsoftware")
    ]


@pytest.fixture
def first_edition_only(collection, settings):
    """The Archive of Example 8.2's first answer: the next edition is held elsewhere."""
    for directory in (
        "sid.inpe.br/mtc-m18/2012/07.12.18.08",
        "sid.inpe.br/mtc-m18/2012/07.12.18.08.49",
    ):
        shutil.rmtree(collection / directory)
    return Client(create_app(settings), "")


def test_example_8_2_first_answer_when_the_chain_leaves_the_archive(first_edition_only):
    response = first_edition_only.url_request(
        "8JMKD3MGP8W/35MMLL8", verblist="GetLastEdition GetMetadata(oai_dc)"
    )
    assert_answer(response.text, EXAMPLE_8_2_FIRST)


def test_example_8_2_second_answer(client: Client):
    response = client.url_request(
        "sid.inpe.br/mtc-m18/2012/07.12.18.08", verblist="GetLastEdition GetMetadata(oai_dc)"
    )
    assert_answer(
        response.text.replace(f"{ADDRESS}{client.mount}/", f"{ADDRESS}/"), EXAMPLE_8_2_SECOND
    )


def test_example_8_2_in_one_round_when_the_archive_holds_both_editions(client: Client):
    """The sample holds both editions: the Archive follows the chain itself (SPEC §4.1), so the
    first answer already carries the second answer's relation pairs and ibi.nextedition."""
    got = dict(
        pairs.parse(
            client.url_request(
                "8JMKD3MGP8W/35MMLL8", verblist="GetLastEdition GetMetadata(oai_dc)"
            ).text
        )
    )
    second = dict(expected(EXAMPLE_8_2_SECOND))
    for name in (
        "ibi.lastedition.metadata(oai_dc)",
        "state.lastedition.metadata(oai_dc)",
        "timestamp.lastedition.metadata(oai_dc)",
        "contenttype.lastedition.metadata(oai_dc)",
    ):
        assert got[name] == second[name]
    assert got["ibi.nextedition"] == "{rep sid.inpe.br/mtc-m18/2012/07.12.18.08}"
    assert got["url.lastedition.metadata(oai_dc)"].endswith("/2012/07.12.18.08.49/doc/oai_dc.xml")


def test_the_urlkey_is_new_on_every_answer(client: Client):
    keys = {
        dict(pairs.parse(client.url_request("8JMKD3MGP8W/35MMLL8").text))["urlkey"]
        for _ in range(20)
    }
    assert len(keys) == 20


def test_every_last_edition_pair_equals_the_plain_pair_without_next_edition(collection):
    """§7.2: an item with no next edition is its own last edition."""
    archive = Archive(
        index.scan(collection), ADDRESS, SERVICE, PLATFORM, resolve_file=index.resolve_file
    )
    links = Links(f"http://{ADDRESS}", "/" + SERVICE)
    answer = dict(archive.montar_lista_de_url(UrlRequest("LK47B6W/362SFKH"), links))
    for name in ("ibi", "url", "state", "timestamp", "contenttype"):
        assert answer[name + ".lastedition"] == answer[name]


def test_answers_module_has_no_web_framework():
    import archive_service.protocol.answers as mod

    source = Path(mod.__file__).read_text(encoding="utf-8")
    assert "flask" not in source.lower() and "werkzeug" not in source.lower()
    assert answers.filtrar_lista_de_url([], answers.Verbs()) == []
