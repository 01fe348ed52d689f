"""What an import refuses before it changes anything (imports/apply.py calls `problems` first):
every record's faults, one line each, and the editions' chains it would break."""

from __future__ import annotations

import json
import unicodedata
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..collection import items as itemsmod
from ..collection import sidecar as sidecarmod
from ..common.yamlsafe import dump_sidecar
from ..stores.mapping import Mapped
from .records import EDITION_OF, METADATA_OF, RELATIONS, TRANSLATION_OF, Record

# The sidecar keys an import writes from a record's own content; a revision replaces them
# and keeps the others (the relations other records set on the item, what an admin added).
OWN_KEYS = ("location", "language", "dc", "contenttype", "translations")
# What a record's own keys may take in its item.yaml: the sidecar's bound less room for the
# keys the deposit and the relations add (ibip, timestamp, nextedition, metadata, ...).
OWN_BYTES = sidecarmod.MAX_BYTES - 4096


def _dc(record: Record) -> dict[str, list[str]] | None:
    dc = {k: list(v) for k, v in record.dc.items() if v}
    for element, value in (
        ("title", record.title),
        ("language", record.language),
        ("date", record.date),
    ):
        if value and element not in dc:
            dc[element] = [value]
    return {k: v[0] if len(v) == 1 else v for k, v in dc.items()} or None


def own_keys(record: Record, ibis: Mapping[str, str], languages: Mapping[str, str]) -> dict:
    """The sidecar keys of `record`'s own item (OWN_KEYS), its relations resolved."""
    own: dict[str, Any] = {}
    if record.location:
        own["location"] = record.location
    if record.language:
        own["language"] = record.language
    dc = _dc(record)
    if dc:
        own["dc"] = dc
    if METADATA_OF in record.relations:
        own["contenttype"] = "Metadata"
    other = record.relations.get(TRANSLATION_OF)
    if other is not None and other in ibis:
        own["translations"] = {languages[other]: ibis[other]}
    return own


def problems(
    records: list[Record],
    mapped: Mapping[str, Mapped],
    languages: dict[str, str],
    complete: bool = False,
) -> list[str]:
    """Every fault of `records` that would stop them being applied, one line each."""
    problems: list[str] = []
    seen: dict[str, Record] = {}
    for record in records:
        where = record.where or f"record {record.source_id!r}"
        if not record.source_id or not record.source_id.strip():
            problems.append(f"{where}: no id")
            continue
        if record.source_id in seen:
            problems.append(
                f"{where}: id {record.source_id!r} again (first at {seen[record.source_id].where})"
            )
            continue
        seen[record.source_id] = record
    live = {r.source_id: r for r in seen.values() if not r.deleted}
    for record in live.values():
        where = record.where or f"record {record.source_id!r}"
        if not record.files and not record.location:
            problems.append(f"{where}: neither files nor a location")
        if record.location:
            try:
                sidecarmod.location_url(record.location)
            except ValueError as exc:
                problems.append(f"{where}: location: {exc}")
        for path in record.files:
            if not Path(path).is_file() or Path(path).is_symlink():
                problems.append(f"{where}: {path} is not a regular file")
        names = [Path(p).name for p in record.files]
        if len(set(names)) != len(names):
            problems.append(f"{where}: two files with one name; doc/ holds one file per name")
        # On a case-insensitive or normalizing disk (or a copy of the collection made there)
        # one would replace the other in doc/, the bag's checksums notwithstanding.
        elif len({unicodedata.normalize("NFC", n).casefold() for n in names}) != len(names):
            problems.append(
                f"{where}: two file names differ only in case or Unicode form; doc/ holds "
                "one file per name"
            )
        for name in names:
            if itemsmod.UNSERVED.search(name):  # it would be in doc/, never served nor listed
                problems.append(
                    f"{where}: file name {name!r} holds a control character or a backslash"
                )
        # A sidecar past its bound is refused by the index and by every later revision: the
        # item would be written, never served, and the import stuck on it at each re-run.
        own = own_keys(record, {}, {})
        # As YAML a value takes at most ~4 times its JSON (a line break: a blank line and an
        # indent); only a record that might come near the bound is written out (66 µs each).
        rough = len(json.dumps(own, ensure_ascii=False).encode("utf-8"))
        size = len(dump_sidecar(own).encode("utf-8")) if rough * 8 > OWN_BYTES else 0
        if size > OWN_BYTES:
            problems.append(
                f"{where}: its title, Dublin Core and location take {size} bytes in "
                f"{sidecarmod.SIDECAR}, more than the {OWN_BYTES} an import may write"
            )
        if record.language:
            try:
                languages[record.source_id] = sidecarmod.normalize_language(record.language)
            except ValueError as exc:
                problems.append(f"{where}: language: {exc}")
        for key in record.relations:
            if key not in RELATIONS:
                problems.append(f"{where}: unknown relation {key!r}")
    for record in live.values():
        where = record.where or f"record {record.source_id!r}"
        for key, other in record.relations.items():
            if key not in RELATIONS:
                continue
            if other == record.source_id:
                problems.append(f"{where}: {key} names the record itself")
            elif other in seen and seen[other].deleted:
                problems.append(f"{where}: {key} {other!r}: that record is deleted")
            elif other not in live and (complete or other not in mapped or mapped[other].deleted):
                earlier = "" if complete else ", in this run or an earlier one of this source"
                problems.append(f"{where}: {key} {other!r}: no record has this id{earlier}")
        other = record.relations.get(TRANSLATION_OF)
        if other is not None and other in live:
            if record.source_id not in languages:
                problems.append(f"{where}: translation_of needs the record's language")
            if other not in languages:
                problems.append(
                    f"{where}: translation_of {other!r}: that record has no language, and "
                    "translations are listed by language"
                )
            elif languages.get(record.source_id) == languages[other]:
                problems.append(
                    f"{where}: translation_of {other!r}: both are in {languages[other]}"
                )
        if other is not None and other not in live and other in mapped:
            problems.append(
                f"{where}: translation_of {other!r}: give that record in the same run (its "
                "language is needed)"
            )
    problems += _edition_problems(live)
    for key in (METADATA_OF,):
        targets: dict[str, Record] = {}
        for record in live.values():
            other = record.relations.get(key)
            if other is None:
                continue
            if other in targets:
                problems.append(
                    f"{record.where}: {key} {other!r}: {targets[other].where} says so too; an "
                    "item has one metadata item"
                )
            targets[other] = record
    return problems


def place(problem: str) -> tuple:
    """The order of problem lines: by file, then line number (`file:12: …`)."""
    where = problem.split(": ", 1)[0]
    name, _, line = where.rpartition(":")
    return (name, int(line), "") if line.isdigit() else (where, 0, problem)


def _edition_problems(live: Mapping[str, Record]) -> list[str]:
    problems = []
    nexts: dict[str, str] = {}  # source id -> the id of its next edition
    for record in live.values():
        old = record.relations.get(EDITION_OF)
        if old is None or old == record.source_id:
            continue
        if old in nexts:
            first = live[nexts[old]].where
            problems.append(
                f"{record.where}: edition_of {old!r}: {first} is its next edition already"
            )
            continue
        nexts[old] = record.source_id
    reported: set[str] = set()
    for start in nexts:
        seen = [start]
        current = start
        while current in nexts:
            current = nexts[current]
            if current in seen:
                cycle = seen[seen.index(current) :]
                if not reported & set(cycle):
                    reported |= set(cycle)
                    ids = " -> ".join(repr(i) for i in [*cycle, current])
                    problems.append(
                        f"{live[current].where}: edition_of makes a cycle: {ids} (an edition "
                        "chain must end)"
                    )
                break
            seen.append(current)
    return problems
