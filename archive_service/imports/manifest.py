"""A manifest source (issue 21): a CSV or YAML file with one row per item of an existing
repository, read into `Record`s.

Columns (CSV: a header line naming them; YAML: a list of maps with these keys): `id` (the
row's own id, stable across runs), `files` (paths of local files, relative to the manifest's
directory; CSV: separated by `;`), `location` (an http(s) URL where the content lives),
`title`, `language`, `date`, and the relations `edition_of`, `translation_of`,
`metadata_of` naming other rows' ids. `id` and one of `files` or `location` are needed.

Every fault is one line naming `file:line`; a manifest with any fault yields nothing
(`ImportRefused`). A file must be a regular file whose real path lies under the manifest's
directory (or the `root` given): no `..`, no absolute path elsewhere, no symbolic link out
of it, so a manifest cannot copy /etc/shadow into a public collection.
"""

from __future__ import annotations

import csv
import os
import re
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

from ..common.yamlsafe import SafeLoader
from .apply import ImportRefused
from .records import RELATIONS, Record

COLUMNS = ("id", "files", "location", "title", "language", "date", *RELATIONS)
REQUIRED = ("id",)
FILE_SEPARATOR = ";"
# Far beyond a repository of a few million items' manifest, far below what would exhaust
# a small server's memory as Records (about 1 KB each).
MAX_ROWS = 2_000_000
MAX_FIELD = 64 * 1024  # one cell (an abstract is a few KB)
MAX_PROBLEMS = 200  # lines shown; the count of the rest is said
# W3CDTF, as Dublin Core dates are written: YYYY, YYYY-MM, YYYY-MM-DD, or a full timestamp.
_DATE = re.compile(r"\d{4}(-\d{2}(-\d{2}([T ][0-9:.]+(Z|[+-]\d{2}:?\d{2})?)?)?)?")


def source_name(path: str | os.PathLike[str]) -> str:
    """The mapping's source name of a manifest: its real path, so that the same file given
    by another relative path is the same source."""
    return "manifest:" + os.path.realpath(path)


def read(path: str | os.PathLike[str], root: str | os.PathLike[str] | None = None) -> list[Record]:
    """The records of the manifest at `path` (CSV unless it ends in .yaml or .yml), files
    confined to `root` (default: the manifest's directory). ImportRefused lists every fault."""
    records, problems = scan(path, root)
    if problems:
        raise ImportRefused(shorten(problems))
    return records


def scan(
    path: str | os.PathLike[str], root: str | os.PathLike[str] | None = None
) -> tuple[list[Record], list[str]]:
    """`read`'s records of the rows that could be read, and the faults of the others (for
    `apply(problems=…)`, which adds those it finds itself)."""
    path = Path(path)
    base = Path(root) if root is not None else path.parent
    try:
        real_root = Path(os.path.realpath(base, strict=True))
    except OSError as exc:
        return [], [f"{base}: {exc.strerror}"]
    problems: list[str] = []
    records: list[Record] = []
    try:
        rows = _yaml_rows(path) if path.suffix.lower() in (".yaml", ".yml") else _csv_rows(path)
        for line, row in rows:
            where = f"{path}:{line}"
            if len(records) >= MAX_ROWS:
                problems.append(f"{where}: more than {MAX_ROWS} rows; split the manifest")
                break
            record = _record(row, where, base, real_root, problems)
            if record is not None:
                records.append(record)
    except _Fault as fault:
        problems.append(str(fault))
    except OSError as exc:
        problems.append(f"{path}: cannot read: {exc.strerror}")
    except UnicodeDecodeError as exc:
        problems.append(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})")
    return records, problems


def shorten(problems: list[str]) -> list[str]:
    if len(problems) <= MAX_PROBLEMS:
        return problems
    more = len(problems) - MAX_PROBLEMS
    return [*problems[:MAX_PROBLEMS], f"... and {more} more problem(s)"]


class _Fault(Exception):
    """A fault that stops reading the manifest (its syntax, its header)."""


def _csv_rows(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    csv.field_size_limit(MAX_FIELD)
    with open(path, encoding="utf-8-sig", newline="") as stream:
        reader = csv.reader(stream, strict=True)
        try:
            header = next(reader, None)
            if header is None:
                raise _Fault(f"{path}:1: empty; the first line names the columns")
            header = [h.strip().lower() for h in header]
            unknown = [h for h in header if h not in COLUMNS]
            if unknown:
                raise _Fault(
                    f"{path}:1: unknown column(s) {', '.join(map(repr, unknown))}; the columns "
                    f"are {', '.join(COLUMNS)}"
                )
            twice = sorted({h for h in header if header.count(h) > 1})
            if twice:
                raise _Fault(f"{path}:1: column(s) {', '.join(twice)} named twice")
            if "id" not in header:
                raise _Fault(f"{path}:1: no id column")
            line = reader.line_num
            for cells in reader:
                if any(cell.strip() for cell in cells):
                    if len(cells) > len(header):
                        raise _Fault(
                            f"{path}:{line + 1}: {len(cells)} cells, more than the "
                            f"{len(header)} columns"
                        )
                    row = dict(zip(header, cells, strict=False))
                    files = row.get("files", "")
                    row["files"] = [f for f in files.split(FILE_SEPARATOR) if f.strip()]
                    yield line + 1, row
                line = reader.line_num
        except csv.Error as exc:
            raise _Fault(f"{path}:{reader.line_num}: {exc}") from None


def _yaml_rows(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """The rows of a YAML manifest, read event by event (libyaml's parser): memory stays
    that of one row however long the list (composing the whole document took 40 bytes of
    nodes per byte of manifest). Nothing nested and no alias: a small file cannot stand for
    a huge one."""
    with open(path, "rb") as stream:
        events = yaml.parse(stream, Loader=SafeLoader)
        try:
            yield from _yaml_items(path, events)
        except yaml.MarkedYAMLError as exc:
            mark = exc.problem_mark
            line = mark.line + 1 if mark else 1
            raise _Fault(f"{path}:{line}: YAML syntax error: {exc.problem}") from None
        except yaml.YAMLError as exc:
            raise _Fault(f"{path}: YAML error: {exc}") from None


def _line(event: yaml.Event) -> int:
    return event.start_mark.line + 1


def _yaml_items(path: Path, events: Iterator[yaml.Event]) -> Iterator[tuple[int, dict[str, Any]]]:
    def next_event() -> yaml.Event:
        event = next(events)
        if isinstance(event, yaml.AliasEvent):
            raise _Fault(f"{path}:{_line(event)}: an alias (*{event.anchor}); write values out")
        return event

    event = next_event()
    while isinstance(event, (yaml.StreamStartEvent, yaml.DocumentStartEvent)):
        event = next_event()
    if isinstance(event, (yaml.StreamEndEvent, yaml.DocumentEndEvent)):
        raise _Fault(f"{path}:1: empty; give a list of items")
    if not isinstance(event, yaml.SequenceStartEvent):
        raise _Fault(f"{path}:{_line(event)}: must be a list of items (- id: …)")
    while not isinstance(event := next_event(), yaml.SequenceEndEvent):
        line = _line(event)
        if not isinstance(event, yaml.MappingStartEvent):
            raise _Fault(f"{path}:{line}: an item must be a map of keys (id, files, …)")
        row: dict[str, Any] = {}
        while not isinstance(key := next_event(), yaml.MappingEndEvent):
            name = key.value if isinstance(key, yaml.ScalarEvent) else None
            if name not in COLUMNS:
                raise _Fault(
                    f"{path}:{_line(key)}: unknown key {name!r}; the keys are {', '.join(COLUMNS)}"
                )
            value = next_event()
            if isinstance(value, yaml.ScalarEvent):
                row[name] = [value.value] if name == "files" and value.value else value.value
                continue
            if name == "files" and isinstance(value, yaml.SequenceStartEvent):
                files = []
                while isinstance(item := next_event(), yaml.ScalarEvent):
                    files.append(item.value)
                if isinstance(item, yaml.SequenceEndEvent):
                    row[name] = files
                    continue
            kinds = "text" + (" or a list of texts" if name == "files" else "")
            raise _Fault(f"{path}:{_line(value)}: {name} must be {kinds}")
        yield line, row
    # The end, not a second document: its rows were never read, and those imported before
    # became tombstones (a manifest is the whole source).
    event = next_event()
    if isinstance(event, yaml.DocumentEndEvent):
        event = next_event()
    if not isinstance(event, yaml.StreamEndEvent):
        raise _Fault(f"{path}:{_line(event)}: a second YAML document; give one list of items")


def _record(
    row: dict[str, Any], where: str, base: Path, real_root: Path, problems: list[str]
) -> Record | None:
    def text(key: str) -> str | None:
        value = row.get(key)
        if value is None:
            return None
        value = str(value).strip()
        if len(value) > MAX_FIELD:
            problems.append(f"{where}: {key} longer than {MAX_FIELD} characters")
            return None
        return value or None

    count = len(problems)
    source_id = text("id")
    if source_id is None:
        problems.append(f"{where}: no id")
    date = text("date")
    if date is not None and not _DATE.fullmatch(date):
        problems.append(f"{where}: date {date!r} is not YYYY, YYYY-MM or YYYY-MM-DD")
    files = []
    for name in row.get("files") or []:
        found = confined(name.strip(), base, real_root)
        if isinstance(found, str):
            problems.append(f"{where}: files: {found}")
        else:
            files.append(found)
    relations = {key: value for key in RELATIONS if (value := text(key)) is not None}
    if len(problems) > count:
        return None
    return Record(
        source_id=source_id,
        location=text("location"),
        files=tuple(files),
        title=text("title"),
        language=text("language"),
        date=date,
        relations=relations,
        where=where,
    )


def confined(name: str, base: Path, real_root: Path) -> Path | str:
    """The file `name` (relative to `base`) if it is a regular file whose real path lies under
    `real_root`, else why not."""
    if "\x00" in name:
        return f"{name!r} holds a NUL"
    parts = Path(name).parts
    if ".." in parts:
        return f"{name!r} climbs out with '..'; name files under {real_root}"
    path = base / name
    try:
        real = Path(os.path.realpath(path, strict=True))
    except OSError as exc:
        return f"{name!r}: {exc.strerror}"
    if real != real_root and real_root not in real.parents:
        return f"{name!r} leads to {real}, outside {real_root} (a symbolic link or absolute path)"
    try:
        mode = os.stat(real).st_mode
    except OSError as exc:
        return f"{name!r}: {exc.strerror}"
    if not stat.S_ISREG(mode):
        return f"{name!r} is not a regular file"
    return real
