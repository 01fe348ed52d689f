"""The record codec of the index: what one item directory becomes in the store (`read_item`:
its record, keys, references and languages), an item's record as JSON and back (`encode`,
`decode`); the claim order it stores (`claim`, `claimant`) is protocol/catalog.py's."""

from __future__ import annotations

import ipaddress
import json
from datetime import datetime
from pathlib import Path
from typing import NamedTuple

from ..collection import items
from ..collection.items import Item, Problem
from ..protocol import ibi as ibimod
from ..protocol.catalog import claim, claimant
from ..protocol.ibi import Forms, Ibi
from ..protocol.networks import Networks
from .walk import Found

__all__ = ["claim", "claimant"]  # the claim order the keys table stores (protocol/catalog.py)

NO_LANGUAGE = "-"  # the language-set row counting items that declare no language


def _ibi(text: str) -> Ibi:
    # Stored IBIs were validated when read from the sidecar: only the kind is rebuilt.
    return Ibi("rep" if text.count("/") == 3 else "ibip", text)


def encode(item: Item) -> str:
    record = {
        "name": item.name.text,
        "rep": item.forms.rep,
        "ibip": item.forms.ibip,
        "state": item.state,
        "contenttype": item.contenttype,
        "language": item.language,
        "timestamp": item.timestamp.isoformat(),
        "target": item.target,
        "nextedition": item.nextedition.text if item.nextedition else None,
        "translations": {lang: ref.text for lang, ref in item.translations.items()},
        "metadata": item.metadata.text if item.metadata else None,
        "formats": item.formats,
        "dc": item.dc,
        "filelist_public": item.filelist_public,
        "networks": [str(net) for net in item.networks],
        "location": item.location,
    }
    return json.dumps(
        {k: v for k, v in record.items() if v not in (None, {}, [])}, separators=(",", ":")
    )  # ASCII: file names may hold surrogates


def decode(directory: str, text: str) -> Item:
    r = json.loads(text)
    return Item(
        directory=directory,
        name=_ibi(r["name"]),
        forms=Forms(rep=r.get("rep"), ibip=r.get("ibip")),
        state=r["state"],
        contenttype=r["contenttype"],
        language=r.get("language"),
        timestamp=datetime.fromisoformat(r["timestamp"]),
        target=r.get("target"),
        nextedition=_ibi(r["nextedition"]) if "nextedition" in r else None,
        translations={lang: _ibi(ref) for lang, ref in r.get("translations", {}).items()},
        metadata=_ibi(r["metadata"]) if "metadata" in r else None,
        formats=r.get("formats", {}),
        dc=r.get("dc"),
        filelist_public=r.get("filelist_public", True),
        networks=Networks(ipaddress.ip_network(n) for n in r.get("networks", ())),
        location=r.get("location"),
    )


class _Row(NamedTuple):
    """What reading one item directory gives the store."""

    sortkey: str
    fingerprint: str
    record: str | None
    problems_json: str | None
    keys: list[str]
    refs: list[str]
    langs: list[str]
    problems: list[Problem]
    kind: tuple[str, str] | None  # (state, contenttype) of a readable item


def read_item(root: Path, found: Found) -> _Row:
    directory = found.directory
    item, problems = items.read_item_or_problems(
        root, directory, found.name, found.files, found.has_sidecar
    )
    keys = refs = langs = []
    record = kind = None
    if item is not None:
        record = encode(item)
        kind = (item.state, item.contenttype)
        keys = item.keys()
        refs = sorted(
            {ibimod.key(ref.text) for ref in item.translations.values()}
            | {
                f"{kind}:{ibimod.key(ref.text)}"
                for kind, ref in (("n", item.nextedition), ("m", item.metadata))
                if ref is not None
            }
        )
        langs = sorted({item.language or NO_LANGUAGE, *item.translations})
    problems_json = (
        json.dumps([[p.where, p.message, p.severity] for p in problems]) if problems else None
    )
    return _Row(
        found.sortkey, found.fingerprint, record, problems_json, keys, refs, langs, problems, kind
    )
