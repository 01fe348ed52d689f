"""`Work`: what a citation says of one item, gathered once from its `Item` and the URLs the
web layer gives it; every format (csl.py, bibtex.py, ris.py, jsonld.py, highwire.py) is
made from it."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime

from ..protocol.catalog import Item
from .types import Kind, kind_of

# A creator written `Name <https://orcid.org/0000-…>` or `Name (https://…)`: the URL is theirs.
_CREATOR_URL = re.compile(r"^(?P<name>.*?)\s*[<(](?P<url>https?://[^\s>)]+)[>)]\s*$")
_ORCID = re.compile(r"^\d{4}-\d{4}-\d{4}-\d{3}[\dX]$")
_DATE = re.compile(r"^(\d{4})(?:-(\d{2}))?(?:-(\d{2}))?")


@dataclass(frozen=True)
class Creator:
    name: str
    url: str | None = None  # an ORCID iD or a page of theirs

    @property
    def family_given(self) -> tuple[str, str]:
        """(family, given) of `Family, Given` (Dublin Core's custom); a name without a comma
        is taken whole (given ""): an organization, more often than not."""
        if "," in self.name:
            family, _, given = self.name.partition(",")
            return family.strip(), given.strip()
        return self.name, ""


@dataclass(frozen=True)
class File:
    url: str
    name: str
    mediatype: str
    size: int


@dataclass(frozen=True)
class Work:
    ibi: str
    title: str
    creators: tuple[Creator, ...]
    date: str | None  # as dc:date gives it (YYYY, YYYY-MM or YYYY-MM-DD first)
    description: str | None
    publisher: str | None
    language: str | None
    type_name: str  # dc:type ("" when none: the contenttype Data says nothing of the genre)
    rights: str | None
    cite_as: str  # the persistent URL (the landing page's when no resolver is configured)
    landing: str
    files: tuple[File, ...] = ()
    subjects: tuple[str, ...] = ()
    removed: datetime | None = None  # a Deleted item's time of removal

    @property
    def kind(self) -> Kind:
        return kind_of(self.type_name)

    @property
    def license_url(self) -> str | None:
        """dc:rights when it is a URL (a licence's page), for `license` links and JSON-LD."""
        rights = self.rights or ""
        return rights if re.match(r"^https?://\S+$", rights) else None

    @property
    def date_parts(self) -> list[int] | None:
        found = _DATE.match(self.date or "")
        return [int(part) for part in found.groups() if part] if found else None


def creator_of(text: str) -> Creator:
    found = _CREATOR_URL.match(text)
    if found is None:
        return Creator(text.strip())
    url = found["url"]
    return Creator(found["name"].strip() or url, url)


def _first(dc: dict[str, list[str]], element: str) -> str | None:
    values = [v for v in dc.get(element, ()) if v.strip()]
    return values[0].strip() if values else None


def work_of(item: Item, cite_as: str, landing: str, files: tuple[File, ...] = ()) -> Work:
    """The citation facts of `item`: its inline Dublin Core, the IBI for a missing title,
    the item's own date (its version's time) for a missing dc:date, except for a tombstone,
    whose time is its removal."""
    dc = item.dc or {}
    deleted = item.state == "Deleted"
    date = _first(dc, "date")
    if date is None and not deleted:
        date = item.timestamp.date().isoformat()
    return Work(
        ibi=item.name.text,
        title=_first(dc, "title") or item.name.text,
        creators=tuple(creator_of(c) for c in dc.get("creator", ()) if c.strip()),
        date=date,
        description=_first(dc, "description"),
        publisher=_first(dc, "publisher"),
        language=_first(dc, "language") or item.language,
        type_name=_first(dc, "type") or "",
        subjects=tuple(s.strip() for s in dc.get("subject", ()) if s.strip()),
        rights=_first(dc, "rights"),
        cite_as=cite_as,
        landing=landing,
        files=files,
        removed=item.timestamp if deleted else None,
    )


def orcid_url(url: str | None) -> str | None:
    """The ORCID iD URL when `url` is one (https://orcid.org/…)."""
    if url and url.rstrip("/").rsplit("/", 1)[0] in ("https://orcid.org", "http://orcid.org"):
        tail = url.rstrip("/").rsplit("/", 1)[1]
        return f"https://orcid.org/{tail}" if _ORCID.match(tail) else None
    return None
