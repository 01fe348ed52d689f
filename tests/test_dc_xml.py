"""Inline Dublin Core with characters XML 1.0 does not allow (issue 15): the oai_dc record
stays well-formed (read back by expat, a real XML parser) and `check` names the item and the
element."""

from __future__ import annotations

import xml.parsers.expat
from pathlib import Path

from archive_service.cli import main
from archive_service.web import create_app, oai_dc_xml
from support import SERVICE, Client

ITEM = "iconet.com.br/banon/2012/03.05.08.15"
DC = "{http://purl.org/dc/elements/1.1/}"


def texts(record: bytes) -> dict[str, list[str]]:
    """Each element's text, as expat reads it (it refuses what is not well-formed)."""
    found: dict[str, list[str]] = {}
    parser = xml.parsers.expat.ParserCreate(namespace_separator=" ")
    current: list[str] = []

    def start(name, attrs):
        current[:] = [name.split(" ")[-1], ""]

    def data(text):
        if current:
            current[1] += text

    def end(name):
        if current and current[0] != "dc":
            found.setdefault(current[0], []).append(current[1])
        current[:] = []

    parser.StartElementHandler, parser.CharacterDataHandler = start, data
    parser.EndElementHandler = end
    parser.Parse(record, True)
    return found


def test_oai_dc_is_well_formed_whatever_the_values_hold():
    xml = oai_dc_xml(
        {
            "title": ["a\x01b\x0bc\x1fd\te\nf\rg"],
            "creator": ["\x00", "ok \ufffe"],
            "subject": ["\ud800 alone"],
        }
    )
    got = texts(xml)
    assert got["title"] == ["a\ufffdb\ufffdc\ufffdd\te\nf\ng"]  # expat normalises CR
    assert got["creator"] == ["\ufffd", "ok \ufffd"]
    assert got["subject"] == ["\ufffd alone"]


def test_check_names_the_item_and_element_and_the_record_stays_well_formed(
    collection: Path, settings: dict, capsys
):
    sidecar = collection / ITEM / "item.yaml"
    sidecar.write_text(
        sidecar.read_text(encoding="utf-8").replace(
            'title: "Apresentação', 'title: "Apresenta\\x07ção'
        ),
        encoding="utf-8",
    )

    assert main(["check", str(collection)]) == 1
    out = capsys.readouterr().out
    assert (
        f"warning: {ITEM}/item.yaml: dc: title holds U+0007, which XML 1.0 does not allow "
        "(oai_dc shows U+FFFD in its place)"
    ) in out

    client = Client(create_app(settings), "")
    xml = client.get(f"/{SERVICE}/metadata/{ITEM}", params={"format": "oai_dc"}).body
    assert texts(xml)["title"] == ["Apresenta\ufffdção do sistema de resolução de IBI"]
