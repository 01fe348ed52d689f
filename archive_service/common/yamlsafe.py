"""The one choice of YAML loader (and dumper) for sidecars, their updates, deposits and config
files."""

from __future__ import annotations

import yaml

try:  # libyaml is ~10x faster than the pure-Python loader and ships in PyYAML's wheels
    _BaseLoader = yaml.CSafeLoader
except AttributeError:  # pragma: no cover - PyYAML built without libyaml
    _BaseLoader = yaml.SafeLoader


class SafeLoader(_BaseLoader):  # type: ignore[misc,valid-type]
    """The safe loader, but a plain scalar that looks like a date and is none (2026-02-30,
    2026-13-01) is a YAML error with its line and column: PyYAML raised a bare ValueError,
    which stopped `check`, `index` and `serve` with a traceback instead of naming the file."""


def _timestamp(loader, node):
    try:
        return yaml.constructor.SafeConstructor.construct_yaml_timestamp(loader, node)
    except ValueError as exc:
        raise yaml.constructor.ConstructorError(
            None,
            None,
            f"{node.value!r} is not a valid date or time ({exc}); quote it to keep it as text",
            node.start_mark,
        ) from None


SafeLoader.add_constructor("tag:yaml.org,2002:timestamp", _timestamp)

try:  # the same for writing: a deposit or an import writes one sidecar per item
    SafeDumper = yaml.CSafeDumper
except AttributeError:  # pragma: no cover - PyYAML built without libyaml
    SafeDumper = yaml.SafeDumper


def tab_hint(text: bytes, mark) -> str:
    """PyYAML says 'found character that cannot start any token' for a tab that indents a
    line: name the tab, which an editor shows as spaces."""
    if mark is None:
        return ""
    lines = text.split(b"\n")
    line = lines[mark.line] if mark.line < len(lines) else b""
    if b"\t" in line[: mark.column + 1]:
        return " (a tab: YAML indents with spaces only)"
    return ""


def dump_sidecar(data) -> str:
    """A sidecar's keys as the block YAML deposits, updates and imports write: keys in the
    order given, text as it is (no \\u escapes), no folding of long lines."""
    return yaml.dump(
        dict(data),
        Dumper=SafeDumper,
        default_flow_style=False,
        allow_unicode=True,
        sort_keys=False,
        width=4096,
    )
