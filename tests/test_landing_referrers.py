"""An item named as a translation by many large sidecars (issue 30, tenth adversarial pass):
each referrer's record is decoded once per state of the index, not once per item it names."""

from __future__ import annotations

import json
from pathlib import Path

from archive_service.web import create_app
from support import ADDRESS, SERVICE, Client

TARGETS, REFERRERS = 60, 5
MARK = "REFERRER-RECORD"


def _language(i: int) -> str:
    return f"{chr(97 + i // 26)}{chr(97 + i % 26)}-BR"


def test_a_referrer_is_decoded_once_whatever_it_names(settings, collection: Path, monkeypatch):
    """Before, every item it named decoded each referrer again: 10 referrers of 60 KB naming
    the same 1,700 items made one landing page decode 1 GB, 9.7 s (now 0.25 s)."""
    names = [f"h.example.org/t{i}/2000/01.01.10.00" for i in range(TARGETS)]
    for name in names:
        (collection / name / "doc").mkdir(parents=True)
        (collection / name / "item.yaml").write_text('timestamp: "2012-07-12T18:08:00Z"\n')
    listed = "".join(f"  {_language(i)}: {name}\n" for i, name in enumerate(names))
    for r in range(REFERRERS):
        directory = collection / f"h.example.org/r/2000/01.01.10.{r:02d}"
        (directory / "doc").mkdir(parents=True)
        (directory / "item.yaml").write_text(
            f'timestamp: "2012-07-12T18:08:00Z"\nlanguage: fr\ndc:\n  title: [{MARK}]\n'
            f"translations:\n{listed}"
        )
    site = Client(create_app(settings), "")
    decoded: list[int] = []
    loads = json.loads

    def counted(text, *args, **kwargs):
        if isinstance(text, str) and MARK in text:
            decoded.append(1)
        return loads(text, *args, **kwargs)

    monkeypatch.setattr(json, "loads", counted)
    page = site.get(f"/{SERVICE}/item/h.example.org/r/2000/01.01.10.00", status=200)
    assert MARK in page.text and "t59" in page.text
    assert len(decoded) <= 2 * REFERRERS, len(decoded)


def test_a_page_and_an_oai_record_list_at_most_100_translations(settings, collection: Path):
    """A sidecar may name 1,700 (64 KiB): each a look-up of another item, 100 such sidecars
    made each of their pages 0.4-0.7 s and each GetRecord 0.4 s (now 0.07 s)."""
    names = [f"h.example.org/t{i}/2000/01.01.10.00" for i in range(120)]
    for name in names:
        (collection / name / "doc").mkdir(parents=True)
        (collection / name / "item.yaml").write_text('timestamp: "2012-07-12T18:08:00Z"\n')
    listed = "".join(f"  {_language(i)}: {name}\n" for i, name in enumerate(names))
    directory = collection / "h.example.org/r/2000/01.01.10.00"
    (directory / "doc").mkdir(parents=True)
    (directory / "item.yaml").write_text(
        f'timestamp: "2012-07-12T18:08:00Z"\nlanguage: fr\ntranslations:\n{listed}'
    )
    site = Client(create_app(settings), "")
    page = site.get(f"/{SERVICE}/item/h.example.org/r/2000/01.01.10.00", status=200).text
    shown = [name for name in names if f"{name}<" in page or f'{name}"' in page]
    assert shown == names[:100], len(shown)
    record = site.get(
        f"/{SERVICE}/oai?verb=GetRecord&metadataPrefix=oai_dc"
        f"&identifier=oai:{ADDRESS}:h.example.org/r/2000/01.01.10.00",
        status=200,
    ).text
    assert record.count("hasTranslation") == 100
