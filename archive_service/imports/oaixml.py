"""The XML of an OAI-PMH provider's response, read as it arrives (imports/oaipmh.py): lxml
with no entity expansion, no DTD, no network (libxml2's own depth and size limits), its
elements counted as they are parsed. No HTTP here."""

from __future__ import annotations

from lxml import etree

FEED = 64 * 1024  # bytes parsed between two counts of the elements (a chunk inflated is more)


class TooManyElements(ValueError):
    """The response holds more elements than its bound."""


class Reader:
    """Feeds a response's bytes to lxml: `feed` chunk by chunk, then `close` for its root.
    Past `max_elements` elements, TooManyElements: a parsed element costs ~120 bytes, so
    32 MB of `<a/>` made a 1 GB tree (issue 30, ninth adversarial pass)."""

    def __init__(self, max_elements: int):
        self.max_elements = max_elements
        self.elements = 0
        self.parser = etree.XMLPullParser(
            events=("start",),
            resolve_entities=False,
            no_network=True,
            load_dtd=False,
            remove_blank_text=True,
        )

    def feed(self, chunk: bytes) -> None:
        for at in range(0, len(chunk), FEED):
            self.parser.feed(chunk[at : at + FEED])
            self.elements += sum(1 for _ in self.parser.read_events())
            if self.elements > self.max_elements:
                raise TooManyElements(
                    f"the response holds more than {self.max_elements} XML elements"
                )

    def close(self):
        return self.parser.close()


def has_dtd_or_entities(root) -> bool:
    """Whether the parsed document has a DTD or an entity reference left (OAI-PMH has none)."""
    internal = root.getroottree().docinfo.internalDTD is not None
    return internal or any(True for _ in root.iter(etree.Entity))
