"""Every YAML tag and edge value in a sidecar (issue 30, finding 1): reading it gives a
`Sidecar` or a `SidecarError` (what `check` reports, with line and column), never another
exception. `dc: {title: !!bool maybe}` made PyYAML's constructor raise KeyError, which
stopped `check`, `index` and `serve`; 650 of 3,000 random sidecars did the like."""

from __future__ import annotations

import os
import tempfile

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from archive_service.collection import sidecar

TAGS = [
    "",
    "!!bool ",
    "!!int ",
    "!!float ",
    "!!timestamp ",
    "!!binary ",
    "!!null ",
    "!!str ",
    "!!seq ",
    "!!map ",
    "!!omap ",
    "!!pairs ",
    "!!set ",
    "!!merge ",
    "!!value ",
    "!!yaml ",
    "!!python/object:os.system ",
    "!!python/object/apply:os.system ",
    "!!python/name:os.system ",
    "!!python/tuple ",
    "!!python/str ",
    "!<tag:yaml.org,2002:int> ",
    "!local ",
    "! ",
]
EDGES = [
    "",
    "maybe",
    "yes",
    "No",
    "ON",
    "~",
    "null",
    "0",
    "-0",
    "+",
    "-",
    "_",
    "0b",
    "0b_",
    "0x",
    "0x_",
    "0o7",
    "07",
    "08",
    "0_",
    "1_000",
    "1:2",
    "1:60",
    "190:20:30",
    "-1:2:3.5",
    ".inf",
    "-.INF",
    ".nan",
    ".",
    "1e5",
    "1.0e+5",
    "1.5e+99999",
    "9" * 5000,
    "9" * 101,
    "9" * 100,
    ":".join(["59"] * 3000) + ".5",
    ":".join(["59"] * 33),
    "2001-12-14",
    "2001-12-14t21:59:43.10-05:00",
    "2001-12-14 21:59:43.1234567890 +25",
    "2026-02-30",
    "2026-13-01",
    "0000-01-01",
    "0001-01-01T00:00:00+23:59",
    "0001-01-01 00:00:00 +00:01",
    "9999-12-31T23:59:59-23:59",
    "9999-12-31T23:59:59Z",
    "YWJj",
    "a",
    "=",
    "<<",
    "\\x00",
    "\\uD800",
    "\\U0010FFFF",
    "8JMKD3MGP8W/35MMLL8",
    "iconet.com.br/banon/2009/09.09.22.01",
    "10.0.0.0/8",
    "http://example.org/x",
]
KEYS = list(sidecar.KEYS) + ["<<", "title", "1", "2001-12-14", "? x"]
ANCHORS = ["a", "b"]


@st.composite
def scalars(draw) -> str:
    tag = draw(st.sampled_from(TAGS))
    value = draw(st.one_of(st.sampled_from(EDGES), st.text(max_size=12)))
    style = draw(st.sampled_from(["plain", "single", "double"]))
    if style == "single":
        return tag + "'" + value.replace("'", "''") + "'"
    if style == "double":
        return tag + '"' + value.replace('"', '\\"') + '"'
    return tag + value


def flows(children):
    key = st.one_of(st.sampled_from(list(sidecar.DC_ELEMENTS) + KEYS), scalars())
    return st.one_of(
        st.tuples(st.sampled_from(TAGS), st.lists(children, max_size=4)).map(
            lambda t: t[0] + "[" + ", ".join(t[1]) + "]"
        ),
        st.tuples(st.sampled_from(TAGS), st.lists(st.tuples(key, children), max_size=4)).map(
            lambda t: t[0] + "{" + ", ".join(f"{k}: {v}" for k, v in t[1]) + "}"
        ),
        st.tuples(st.sampled_from(ANCHORS), children).map(lambda t: f"&{t[0]} {t[1]}"),
        st.sampled_from(ANCHORS).map(lambda a: f"*{a}"),
        st.sampled_from(ANCHORS).map(lambda a: f"{{<<: *{a}}}"),
        st.lists(st.sampled_from(ANCHORS), min_size=1, max_size=2).map(
            lambda names: "{<<: [" + ", ".join(f"*{a}" for a in names) + "]}"
        ),
    )


VALUES = st.recursive(scalars(), flows, max_leaves=8)
SIDECARS = st.one_of(
    st.lists(st.tuples(st.sampled_from(KEYS), VALUES), max_size=6).map(
        lambda pairs: "".join(f"{k}: {v}\n" for k, v in pairs)
    ),
    VALUES.map(lambda v: v + "\n"),
    st.lists(VALUES, max_size=4).map(lambda vs: "".join(f"- {v}\n" for v in vs)),
)


@pytest.fixture(scope="module")
def place():
    with tempfile.TemporaryDirectory() as directory:
        yield os.path.join(directory, sidecar.SIDECAR)


def read(place: str, text: str):
    with open(place, "w", encoding="utf-8", errors="surrogatepass") as f:
        f.write(text)
    return sidecar.read(place)


@settings(max_examples=500, deadline=None)
@given(text=SIDECARS)
@example(text="dc: {title: !!bool maybe}\n")
@example(text="timestamp: !!timestamp foo\n")
@example(text="timestamp: '0001-01-01T00:00:00+23:59'\n")
@example(text="dc: {title: &a [1, *a]}\nrep: &b {<<: *b}\n")
@example(text="!!int {!!value '': !!null }\n")  # PyYAML's scalar of a map: its !!value key
def test_only_the_sidecars_own_error_escapes(place, text: str):
    try:
        read(place, text)
    except sidecar.SidecarError as exc:
        assert exc.problems and all(isinstance(p, str) and p for p in exc.problems)
        for problem in exc.problems:
            str(problem)  # it prints: no 4,300-digit integer in it


# The list: each is a problem of the sidecar, at its place in the file.
@pytest.mark.parametrize(
    "text, at",
    [
        ("dc: {title: !!bool maybe}\n", "line 1, column 13"),
        ("timestamp: !!timestamp foo\n", "line 1, column 12"),
        ("dc:\n  title: !!int ''\n", "line 2, column 10"),
        ("dc: {title: !!float x}\n", "line 1, column 13"),
        ("dc: {title: " + "9" * 5000 + "}\n", "line 1, column 13"),
        ("dc: {title: " + ":".join(["59"] * 3000) + ".5}\n", "line 1, column 13"),
        ("dc: {title: 0b_}\n", "line 1, column 13"),
        ("timestamp: 9999-12-31T23:59:59-23:59\n", "line 1, column 12"),
    ],
)
def test_what_the_loader_cannot_build_is_named_with_its_place(place, text, at):
    with pytest.raises(sidecar.SidecarError) as raised:
        read(place, text)
    assert len(raised.value.problems) == 1
    assert at in raised.value.problems[0], raised.value.problems


def test_a_quoted_timestamp_out_of_range_in_utc_is_a_problem_of_its_key(place):
    with pytest.raises(sidecar.SidecarError) as raised:
        read(place, "timestamp: '0001-01-01T00:00:00+23:59'\n")
    assert raised.value.problems[0].startswith("timestamp: "), raised.value.problems
    assert "out of range" in raised.value.problems[0]


def test_what_yaml_allows_of_each_type_is_still_read(place):
    got = read(
        place,
        "dc:\n  title: [!!bool yes, !!int 0x1F, !!float 1, 190:20:30, 1_000]\n"
        "timestamp: 2001-12-14t21:59:43.10-05:00\n",
    )
    assert got.dc == {"title": ["True", "31", "1.0", "685230", "1000"]}
    assert got.timestamp.isoformat() == "2001-12-15T02:59:43.100000+00:00"
