"""The one choice of YAML loader (and dumper) for sidecars, their updates, deposits and config
files."""

from __future__ import annotations

from datetime import UTC

import yaml

try:  # libyaml is ~10x faster than the pure-Python loader and ships in PyYAML's wheels
    _BaseLoader = yaml.CSafeLoader
except AttributeError:  # pragma: no cover - PyYAML built without libyaml
    _BaseLoader = yaml.SafeLoader


class SafeLoader(_BaseLoader):  # type: ignore[misc,valid-type]
    """The safe loader, whose scalars of the YAML types (bool, int, float, timestamp) are
    built only from text of that type's own grammar and within bounds; anything else is a
    YAML error with its line and column. PyYAML's constructors trust the text they are given:
    `!!bool maybe` raised KeyError, `!!int ''` IndexError, `!!timestamp foo` AttributeError,
    `0b_` and a date that is none (2026-02-30) ValueError, a 5,000-digit integer ValueError
    and a long sexagesimal float OverflowError: each stopped `check`, `index` and `serve` with
    a traceback instead of naming the file (issue 30). The constructors run in Python under
    libyaml's parser too, so this costs libyaml nothing."""


# Longer than any number a person writes (an ISBN has 13 digits, a 64-bit integer 20), and far
# below Python's 4,300-digit limit on turning an int into text; sexagesimals this long stay
# within a float's range (60**33 is about 1e58). Quoted, such a value is text, as it should be.
MAX_NUMBER = 100

# The grammar YAML 1.1 gives each type: what the resolver recognises untagged, so `!!int x`
# is built only from text that `x` untagged would have been an int for. A float may also be
# written as an int (`!!float 1` is 1.0).
_GRAMMAR: dict[str, list] = {}
for _first, _resolvers in yaml.resolver.Resolver.yaml_implicit_resolvers.items():
    for _tag, _regexp in _resolvers:
        if _regexp not in _GRAMMAR.setdefault(_tag, []):
            _GRAMMAR[_tag].append(_regexp)
_YAML = "tag:yaml.org,2002:"
_GRAMMAR[_YAML + "float"] += _GRAMMAR[_YAML + "int"]
_GRAMMAR[_YAML + "timestamp"] = [yaml.constructor.SafeConstructor.timestamp_regexp]
_NAMES = {
    "bool": "a boolean",
    "int": "an integer",
    "float": "a number",
    "timestamp": "a date or time",
}


def _wrong(node, message: str) -> yaml.constructor.ConstructorError:
    shown = node.value if len(node.value) <= 40 else node.value[:40] + "…"
    return yaml.constructor.ConstructorError(
        None, None, f"{shown!r} {message}; quote it to keep it as text", node.start_mark
    )


def _checked(kind: str, construct):
    tag = _YAML + kind
    grammar, name = _GRAMMAR[tag], _NAMES[kind]

    def checked_construct(loader, node):
        if not isinstance(node, yaml.ScalarNode):
            # PyYAML would take the `!!value` key of a map as its scalar (`!!int {!!value ''}`)
            raise yaml.constructor.ConstructorError(
                None, None, f"expected a scalar node, but found {node.id}", node.start_mark
            )
        value = node.value
        if kind in ("int", "float") and len(value) > MAX_NUMBER:
            raise _wrong(node, f"is a number of {len(value)} characters (at most {MAX_NUMBER})")
        if not any(regexp.match(value) for regexp in grammar):
            raise _wrong(node, f"is not {name}")
        try:
            built = construct(loader, node)
            if kind == "timestamp" and getattr(built, "tzinfo", None) is not None:
                built.astimezone(UTC)  # 0001-01-01T00:00:00+01:00 is before year 1 in UTC
        except (ValueError, OverflowError) as exc:  # 0b_, 2026-02-30: the grammar's holes
            noun = name.split(" ", 1)[1]  # "a date or time" -> "date or time"
            raise _wrong(node, f"is not a valid {noun} ({exc})") from None
        return built

    return checked_construct


for _kind in _NAMES:
    SafeLoader.add_constructor(
        _YAML + _kind,
        _checked(_kind, getattr(yaml.constructor.SafeConstructor, f"construct_yaml_{_kind}")),
    )

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
