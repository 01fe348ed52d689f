"""A BagIt source (issue 21): each bag directory becomes one item, validated with the
Library of Congress `bagit` library (every payload file against its manifests).

The payload (`data/`) becomes the item's `doc/` (one level: a bag whose payload holds two
files of one name in different folders is refused), `bag-info.txt` its inline Dublin Core
and its relations (`BAG_INFO`).
The record's id is the bag directory's name. A bag (payload or tag files) with a symbolic
link, a file that is not regular, or a `fetch.txt` (files the bag does not hold) is refused:
a bag must carry what it vouches for, and a link would carry a file from outside it into a
public collection.
"""

from __future__ import annotations

import logging
import os
import stat
from collections.abc import Iterable
from pathlib import Path

import bagit

from ..collection.sidecar import DC_ELEMENTS
from ..common import files as filesmod
from .apply import ImportRefused
from .records import EDITION_OF, METADATA_OF, RELATIONS, TRANSLATION_OF, Record

SOURCE = "bagit"
# bag-info.txt's size, at most: bagit reads it whole into lists (25 MB of labels took the
# import to 208 MB and 10 s), and what it gives an item is its Dublin Core, which the
# sidecar holds within 64 KiB.
MAX_BAG_INFO = 1024 * 1024
# A manifest line at its longest: a SHA-512 digest, two spaces and a path of PATH_MAX. bagit
# reads each manifest (and fetch.txt) whole into a dict of its entries: a 118 MB manifest
# listing a million files a one-file bag lacks took the import to 960 MB and 116 s before
# it was refused (issue 30, thirteenth adversarial pass). A manifest lists each file of the
# bag once, so one with more lines than the bag has files is refused unread.
MAX_MANIFEST_LINE = 128 + 2 + 4096 + 1
# What each bag-info.txt label (any case) becomes: `dc:<element>` of the item's inline Dublin
# Core, a relation naming another bag by its directory name (imports/records.py), or None:
# not kept. A label not listed is not kept either. The one table of it: README's is checked
# against it (tests/test_import_bagit.py).
BAG_INFO: dict[str, str | None] = {
    "title": "dc:title",
    "creator": "dc:creator",
    "author": "dc:creator",
    "subject": "dc:subject",
    "external-description": "dc:description",
    "description": "dc:description",
    "source-organization": "dc:publisher",  # RFC 8493: the organization the bag comes from
    "date": "dc:date",
    "type": "dc:type",
    "external-identifier": "dc:identifier",
    "language": "dc:language",  # the first is also the item's `language`
    "rights": "dc:rights",
    **{f"dc-{element}": f"dc:{element}" for element in DC_ELEMENTS},
    "edition-of": EDITION_OF,
    "translation-of": TRANSLATION_OF,
    "metadata-of": METADATA_OF,
    # RFC 8493's other labels are about the bag and its transfer, not the work: the date it
    # was packed (it became the item's dc:date, which citations read as the work's), who
    # sent it (it became a dc:contributor of the work) and how to reach them, its size.
    "bagging-date": None,
    "contact-name": None,
    "contact-phone": None,
    "contact-email": None,
    "organization-address": None,
    "bag-size": None,
    "payload-oxum": None,
    "bag-group-identifier": None,
    "bag-count": None,
    "internal-sender-identifier": None,
    "internal-sender-description": None,
    "bag-software-agent": None,
}


def _values(value) -> tuple[str, ...]:
    values = value if isinstance(value, list) else [value]
    return tuple(str(v).strip() for v in values if str(v).strip())


def read(directories: Iterable[str | os.PathLike[str]]) -> list[Record]:
    """One record per bag; ImportRefused naming each bag that is not valid, and why."""
    problems: list[str] = []
    records: list[Record] = []
    # bagit logs a line per file checked; the problems are reported here instead.
    logging.getLogger("bagit").setLevel(logging.CRITICAL)
    for directory in directories:
        path = Path(directory)
        where = f"bag {path}"
        try:
            records.append(_record(path, where))
        except _Refused as exc:
            problems.append(f"{where}: {exc}")
    if problems:
        raise ImportRefused(problems)
    return records


class _Refused(Exception):
    pass


def _payload(path: Path) -> tuple[list[Path], int]:
    """The payload files, checked before anything reads them, and how many files the bag
    holds in all."""
    data = path / "data"
    if data.is_symlink() or not data.is_dir():
        raise _Refused("data/ is missing or a symbolic link")
    found: list[Path] = []
    held = 0
    # The whole bag, not only data/: bagit reads bag-info.txt and the manifests too, and a
    # link there carried the lines of a file outside the bag into the public dc (a FIFO
    # there hung the import).
    for top, dirs, files in os.walk(path):
        for name in dirs + files:
            entry = Path(top) / name
            relative = entry.relative_to(path)
            try:
                mode = os.lstat(entry).st_mode
            except OSError as exc:
                raise _Refused(f"{relative}: {exc.strerror}") from None
            if stat.S_ISLNK(mode):
                raise _Refused(
                    f"{relative} is a symbolic link (to {filesmod.link_target(entry)}); a bag "
                    "must hold its files"
                )
            if name in files and not stat.S_ISREG(mode):
                raise _Refused(f"{relative} is not a regular file")
            held += name in files
            if name in files and relative.parts[0] == "data":
                found.append(entry)
    return sorted(found), held


def _manifests_within(path: Path, held: int) -> None:
    """Refuse a manifest or fetch.txt listing more than the bag's `held` files, unread by
    bagit (counted here a block at a time)."""
    lines_at_most = held + 1  # a last line without its newline
    for tag in sorted(path.iterdir()):
        name = tag.name
        if not (name == "fetch.txt" or (name.endswith(".txt") and "manifest-" in name)):
            continue
        if tag.stat().st_size > lines_at_most * MAX_MANIFEST_LINE:
            raise _Refused(f"{name} is larger than a manifest of the bag's {held} files")
        lines = 0
        with open(tag, "rb") as text:
            for block in iter(lambda: text.read(1 << 20), b""):
                lines += block.count(b"\n")
                if lines > lines_at_most:
                    raise _Refused(f"{name} lists more than the bag's {held} files")


def _why(bag: bagit.Bag, error: bagit.BagValidationError) -> str:
    """What is wrong with the bag, file by file (bagit's own text repeats each digest)."""
    faults: dict[str, str] = {}
    for detail in error.details or []:
        if isinstance(detail, bagit.ChecksumMismatch):
            faults.setdefault(detail.path, f"{detail.path} differs from its manifest's checksum")
        elif isinstance(detail, bagit.FileMissing):
            faults.setdefault(detail.path, f"{detail.path} is missing")
        elif isinstance(detail, bagit.UnexpectedFile):
            faults.setdefault(detail.path, f"{detail.path} is in no manifest")
        else:
            faults.setdefault(str(detail), str(detail))
    if not faults:  # Payload-Oxum, checked before the files: name them all the same
        listed, present = set(bag.payload_entries()), set(bag.payload_files())
        faults = {p: f"{p} is missing" for p in sorted(listed - present)}
        faults |= {p: f"{p} is in no manifest" for p in sorted(present - listed)}
    shown = list(faults.values())[:5]
    more = len(faults) - len(shown)
    text = error.message.rstrip(".")
    if shown:
        text += ": " + "; ".join(shown) + (f"; and {more} more" if more > 0 else "")
    return text


def _record(path: Path, where: str) -> Record:
    if path.is_symlink() or not path.is_dir():
        raise _Refused("not a directory")
    # Before bagit opens any of them; by their real paths, which the copy then follows no
    # link on (a link swapped in after this check is refused, not followed).
    real = path.resolve()
    files, held = _payload(real)
    _manifests_within(real, held)
    info = real / "bag-info.txt"
    if info.is_file() and info.stat().st_size > MAX_BAG_INFO:
        raise _Refused(f"bag-info.txt is larger than {MAX_BAG_INFO} bytes")
    try:
        bag = bagit.Bag(str(path))
        if list(bag.fetch_entries()):
            raise _Refused("it has a fetch.txt: its files are elsewhere; fetch them first")
        bag.validate()
    except bagit.BagValidationError as exc:
        raise _Refused(f"invalid: {_why(bag, exc)}") from None
    except bagit.BagError as exc:
        raise _Refused(f"not a valid bag: {exc}") from None
    names: dict[str, Path] = {}
    for file in files:
        if file.name in names:
            raise _Refused(
                f"{file.relative_to(real)} and {names[file.name].relative_to(real)} have one "
                "name; doc/ holds one file per name"
            )
        names[file.name] = file
    if not files:
        raise _Refused("its payload (data/) is empty")
    dc: dict[str, tuple[str, ...]] = {}
    relations: dict[str, str] = {}
    language = None
    for label, value in bag.info.items():
        target, values = BAG_INFO.get(label.strip().lower()), _values(value)
        if target is None or not values:
            continue
        if target in RELATIONS:
            relations[target] = values[0]
        else:
            element = target.removeprefix("dc:")
            dc[element] = dc.get(element, ()) + values
    if dc.get("language"):
        language = dc["language"][0]
    return Record(
        source_id=path.resolve().name,
        files=tuple(files),
        language=language,
        dc=dc,
        relations=relations,
        where=where,
    )
