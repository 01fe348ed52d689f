"""An item's OAI-PMH record: its `oai_dc` (the sidecar's inline Dublin Core, or the `oai_dc`
file of the Metadata item it names, as the protocol's GetMetadata(oai_dc) finds it) with its
persistent URL and landing page as `dc:identifier`; the URLs handed out. No web framework."""

from __future__ import annotations

import os
import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from xml.sax.saxutils import escape

from ..collection.sidecar import DC_ELEMENTS, xml_text
from ..protocol.answers import Links
from ..protocol.catalog import Item, listed_translations

OAI_DC = "http://www.openarchives.org/OAI/2.0/oai_dc/"
OAI_DC_XSD = "http://www.openarchives.org/OAI/2.0/oai_dc.xsd"
DC = "http://purl.org/dc/elements/1.1/"
XSI = "http://www.w3.org/2001/XMLSchema-instance"

# An item's relations to other items of this Archive, as dc:relation values "<name> <the other
# item's OAI identifier>" (docs/oai-pmh.md): both sides of each, so that `import oai-pmh`
# (imports/oaipmh.py) reads them back from whichever record it meets.
HAS_NEXT_EDITION, IS_NEXT_EDITION_OF = "hasNextEdition", "isNextEditionOf"
HAS_METADATA, IS_METADATA_OF = "hasMetadata", "isMetadataOf"
HAS_TRANSLATION = "hasTranslation"  # the index gives a translation on both sides

MAX_RECORD_FILE = 1024 * 1024  # a Metadata item's oai_dc file read for a record, at most
# And its elements, at most: parsing costs per element, and a file of 1 MiB of empty elements
# (`<a/>` 262,000 times) cost 0.5-0.7 s per record and yielded nothing, so each GetRecord of
# an item naming it took 0.5 s and a ListRecords page of 100 such records 68 s, a page slot
# held all the while (issue 30, ninth adversarial pass). A record is some tens of elements;
# an item's inline dc (32 KiB) holds a thousand or two.
MAX_RECORD_ELEMENTS = 2000
_PROLOG_FEED = 64  # bytes parsed at a time before the root element
_FEED = 16 * 1024  # and after it


def landing_page(site: Links, ibi: str) -> str:
    """The item's landing page, `http://<archiveaddress><mount>/<archiveserviceibi>/item/<ibi>`:
    the one rule of its URL for the records (the page itself is web's)."""
    return f"{site.service}/item/{site.path(ibi)}"


def oai_dc_text(dc: Mapping[str, list[str]], identifiers: Iterable[str] = ()) -> str:
    """An oai_dc record (OAI-PMH 2.0 oai_dc schema) of Dublin Core values, `identifiers`
    added before the item's own dc:identifier values (each URL once). Written as text: a
    page of 100 records through ElementTree cost 40 % of the page."""
    parts = [
        f'<oai_dc:dc xmlns:oai_dc="{OAI_DC}" xmlns:dc="{DC}" xmlns:xsi="{XSI}" '
        f'xsi:schemaLocation="{OAI_DC} {OAI_DC_XSD}">'
    ]
    for element in DC_ELEMENTS:
        values = dc.get(element, ())
        if element == "identifier":
            values = dict.fromkeys([*identifiers, *values])
        parts += (f"<dc:{element}>{escape(xml_text(value))}</dc:{element}>" for value in values)
    parts.append("</oai_dc:dc>")
    return "".join(parts)


def oai_dc_xml(dc: Mapping[str, list[str]]) -> bytes:
    """The item's inline Dublin Core as an oai_dc document (the metadata page's format)."""
    return ('<?xml version="1.0" encoding="UTF-8"?>\n' + oai_dc_text(dc)).encode("utf-8")


class _NotRecord(Exception):
    """What an oai_dc record never holds: a DTD, more than MAX_RECORD_ELEMENTS elements."""


class _Bounded(ET.TreeBuilder):
    """A tree of at most MAX_RECORD_ELEMENTS elements, with no DTD: the parse stops at the
    element past the bound, and at a DOCTYPE (whose entities could make a few bytes into
    millions of elements before expat's amplification limit, which starts at 8 MiB)."""

    def __init__(self) -> None:
        super().__init__()
        self.elements = 0

    def start(self, tag, attrs):
        self.elements += 1
        if self.elements > MAX_RECORD_ELEMENTS:
            raise _NotRecord(f"more than {MAX_RECORD_ELEMENTS} elements")
        return super().start(tag, attrs)

    def doctype(self, name, pubid, system) -> None:
        raise _NotRecord("a DTD")


def _bounded_tree(data: bytes) -> ET.Element:
    """The root element of the XML document `data`, parsed by Python's expat (no external
    entities) in pieces: expat goes on reading a piece to its end after _Bounded refuses
    (without calling it again), so the prolog goes in small ones, ending at a DOCTYPE before
    any content could use its entities, and the rest in _FEED bytes (_NotRecord)."""
    target = _Bounded()
    parser = ET.XMLParser(target=target)
    at = 0
    while at < len(data):
        step = _FEED if target.elements else _PROLOG_FEED
        parser.feed(data[at : at + step])
        at += step
    return parser.close()


def dc_of_file(path: Path) -> dict[str, list[str]] | None:
    """The Dublin Core of an oai_dc file (a Metadata item's), or None when it is not one."""
    try:
        with open(path, "rb") as f:
            data = f.read(MAX_RECORD_FILE + 1)
        if len(data) > MAX_RECORD_FILE:
            return None
        root = _bounded_tree(data)
    except (OSError, ET.ParseError, _NotRecord):
        return None
    if root.tag != f"{{{OAI_DC}}}dc":
        return None
    dc: dict[str, list[str]] = {}
    for child in root:
        name = child.tag[len(DC) + 2 :] if child.tag.startswith(f"{{{DC}}}") else ""
        text = "".join(child.itertext()).strip()
        if name in DC_ELEMENTS and text:
            dc.setdefault(name, []).append(text)
    return dc


def record_dc(
    item: Item,
    lookup: Callable[[str], Item | None],
    resolve_file: Callable[[str | os.PathLike, str, str], Path | None],
    root: str | os.PathLike,
) -> Mapping[str, list[str]]:
    """What GetMetadata(oai_dc) gives for `item` (protocol/answers.py's order): the oai_dc file
    of the Metadata item it names when this Archive holds one and it is not licensed (its
    files go only to users inside its networks, and OAI-PMH answers anyone), else its inline dc."""
    if item.metadata is not None:
        meta = lookup(item.metadata.text)
        meta = None if meta is not None and meta.networks else meta
        rel = meta.formats.get("oai_dc") if meta is not None else None
        path = resolve_file(root, meta.directory, rel) if rel else None
        found = dc_of_file(path) if path is not None else None
        if found is not None:
            return found
    return item.dc or {}


def relation_values(
    item: Item,
    lookup: Callable[[str], Item | None],
    identifier: Callable[[Item], str],
    naming: Callable[[Item, str], list[Item]],
) -> list[str]:
    """`item`'s relations to items this Archive serves (not to a Deleted one: a deleted
    record), as dc:relation values (HAS_NEXT_EDITION, ...): `identifier` gives an item's OAI
    identifier, `naming(item, key)` the items whose `key` (nextedition, metadata) names it."""
    found: list[str] = []
    for name, other in (
        (HAS_NEXT_EDITION, item.nextedition),
        (HAS_METADATA, item.metadata),
        *((HAS_TRANSLATION, ibi) for _, ibi in listed_translations(item)),
    ):
        target = lookup(other.text) if other is not None else None
        if target is not None and target.state != "Deleted":
            found.append(f"{name} {identifier(target)}")
    for name, key in ((IS_NEXT_EDITION_OF, "nextedition"), (IS_METADATA_OF, "metadata")):
        found += (
            f"{name} {identifier(other)}" for other in naming(item, key) if other.state != "Deleted"
        )
    return found
