"""The pairs format (Table 4.2), IBI forms (ID Tables 6.1, 7.1) and the sidecar schema (SPEC §7)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from archive_service.collection import sidecar
from archive_service.protocol import ibi, pairs


def test_render_sorts_and_uses_crlf():
    body = pairs.render(
        [("url", "http://x/y"), ("archiveaddress", "a.b"), ("ibi", "{rep a/b/2000/01.01.00.00}")]
    )
    assert body == "archiveaddress a.b\r\nibi {rep a/b/2000/01.01.00.00}\r\nurl http://x/y"
    assert pairs.render([]) == ""


def test_parse_accepts_the_grammar_and_rejects_the_rest():
    assert pairs.parse("a {b c}  d e\r\nf {}") == [("a", "{b c}"), ("d", "e"), ("f", "{}")]
    for bad in (" a b", "a b ", "a", "a {b", "a {b  c}", "a b\n c d", "a é", "a {b}c", "a\tb"):
        with pytest.raises(pairs.PairsError):
            pairs.parse(bad)


@pytest.mark.slow
@given(
    st.lists(
        st.tuples(st.from_regex(r"[a-z][a-z.()_]{0,12}", fullmatch=True), st.text(max_size=20)),
        max_size=8,
    )
)
def test_any_text_becomes_a_parseable_ascii_word(items):
    rendered = pairs.render([(name, pairs.word(value) if value else "{}") for name, value in items])
    assert rendered.isascii()
    assert len(pairs.parse(rendered)) == len(items)


def test_word_encodes_bytes_of_the_disk():
    assert pairs.word("Relatório Final.pdf") == "Relat%C3%B3rio%20Final.pdf"
    assert pairs.word("Relat\udcf3rio") == "Relat%F3rio"  # a Latin-1 byte, as os.fsdecode keeps it
    assert pairs.word("{}%") == "%7B%7D%25"


def test_parse_query_decodes_table_4_1_and_refuses_repeats():
    q = pairs.parse_query("a=x%20y&b=1997-07-16T19:20%2B01:00&c=p+q&d=%f3")
    assert q == {"a": "x y", "b": "1997-07-16T19:20+01:00", "c": "p q", "d": "\udcf3"}
    with pytest.raises(pairs.PairsError, match="more than once"):
        pairs.parse_query("a=1&a=2")


@pytest.mark.parametrize(
    "text, kind",
    [
        ("sid.inpe.br/mtc-m19/2013/09.04.12.27.57", "rep"),
        ("sid.inpe.br/mtc-m18@80/2009/07.21.13.23.47", "rep"),
        ("sid.inpe.br/mtc-m18.802/2009/07.21.13.23.47.123", "rep"),
        ("iconet.com.br/banon/2009/09.09.22.01", "rep"),
        ("localhost/banon/2009/09.09.22.01", "rep"),
        ("8JMKD3MGP7W/3EPGUE5", "ibip"),
        ("8jmkd3mgp7w/3epgue5", "ibip"),
        ("LK47B6W/362SFKH", "ibip"),
    ],
)
def test_valid_ibis(text, kind):
    assert ibi.parse(text).kind == kind


@pytest.mark.parametrize(
    "text, message",
    [
        ("8JMKD3MGP7W/3EPGUE0", "character '0' at position 7"),
        ("8JMKD3MGP7W/", "suffix '' breaks rule palavra"),
        ("a/b/c", "has 3 segments"),
        ("sid.inpe.br/mtc-m19/2013/13.04.12.27", "is not a UTC date"),
        ("sid.inpe.br/mtc-m19/2013/09.04.12", "must be MM.DD.hh.mm"),
        ("sid.inpe.br/-mtc/2013/09.04.12.27", "breaks rule palavra"),
        ("sid.in_pe.br/mtc/2013/09.04.12.27", "subdomain 'sid.in_pe.br' breaks rule"),
        ("sid.inpe.br/mtc/13/09.04.12.27", "year '13' must be 4 or more digits"),
        ("a b/c", "white space"),
    ],
)
def test_invalid_ibis_say_which_rule_failed(text, message):
    with pytest.raises(ibi.IbiError, match=message.replace("(", r"\(").replace(")", r"\)")):
        ibi.parse(text)


def test_forms_render_as_table_7_4():
    assert (
        ibi.Forms(rep="a.b/c/2000/01.01.00.00", ibip="LK47B6W/362SFKH").render()
        == "{rep a.b/c/2000/01.01.00.00 ibip LK47B6W/362SFKH}"
    )
    assert ibi.Forms.of(ibi.parse("LK47B6W/362SFKH")).render() == "{ibip LK47B6W/362SFKH}"


def test_sidecar_lists_every_fault_by_key():
    with pytest.raises(sidecar.SidecarError) as caught:
        sidecar.parse(
            {
                "state": "Lost",
                "target": "../x",
                "language": "portuguese",
                "nextedition": "nope",
                "formats": {"marc": "m.xml"},
                "dc": {"titel": "x"},
                "access": {"networks": ["10.0.0.0/33"]},
                "timestamp": "yesterday",
            }
        )
    joined = " | ".join(caught.value.problems)
    for key in (
        "state:",
        "target:",
        "language:",
        "nextedition:",
        "formats:",
        "dc:",
        "access:",
        "timestamp:",
    ):
        assert key in joined


def test_sidecar_defaults_and_normalisation():
    side = sidecar.parse(
        {
            "language": "PT-br",
            "timestamp": "2014-01-02T17:23:57Z",
            "extra": 1,
            "translations": {"en": "8JMKD3MGP8W/35MME4E"},
        }
    )
    assert side.language == "pt-BR" and side.state == "Original" and side.contenttype == "Data"
    assert side.timestamp.isoformat() == "2014-01-02T17:23:57+00:00"
    assert side.unknown_keys == ["extra"]
    assert sidecar.parse(None).state == "Original"


def _doc_path_by_pathlib(value):
    """doc_path as first written: every path through PurePosixPath."""
    from pathlib import PurePosixPath

    if not isinstance(value, str) or not value.strip():
        raise ValueError("must be a file name under doc/")
    if "\\" in value or "\x00" in value:
        raise ValueError(f"{value!r} has a backslash or NUL")
    path = PurePosixPath(value)
    if path.is_absolute() or ".." in path.parts:
        raise ValueError(f"{value!r} must stay under doc/ (no leading '/', no '..')")
    return str(path)


@given(
    st.lists(
        st.sampled_from(["", ".", "..", "a", " b", "c.pdf", "d d", "/", "\\", "é"]), max_size=6
    ).map("/".join)
    | st.text(max_size=12)
)
def test_doc_path_equals_pathlib(value):
    def outcome(convert):
        try:
            return ("path", convert(value))
        except ValueError as exc:
            return ("error", str(exc))

    assert outcome(sidecar.doc_path) == outcome(_doc_path_by_pathlib)


def test_sidecar_yaml_errors_name_the_line(tmp_path):
    path = tmp_path / "item.yaml"
    path.write_text("state: Original\ntarget: [unclosed\n")
    with pytest.raises(sidecar.SidecarError, match="line 3"):
        sidecar.read(path)


# The sidecar loader builds plain documents itself and leaves the rest to PyYAML's
# SafeLoader: whatever the document, both must give the same data or the same error.
_yaml_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.text(max_size=12),
    st.floats(allow_nan=False),
    st.datetimes(),
    st.dates(),
    st.binary(max_size=8),
)
_yaml_data = st.recursive(
    _yaml_scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(
            st.one_of(st.text(max_size=8), st.integers(), st.booleans(), st.none()),
            inner,
            max_size=4,
        ),
    ),
    max_leaves=12,
)

_YAML_BY_HAND = [
    "a: &x [1, 2]\nb: *x\n",  # an alias: the same list twice
    "base: &b {k: 1}\nderived:\n  <<: *b\n  j: 2\n",  # a merge key
    "a: &r [*r]\n",  # an alias of an enclosing node (recursive)
    "? [1, 2]\n: v\n",  # an unhashable key
    "s: !!set {a, b}\n",
    "o: !!omap [a: 1]\n",
    "p: !!pairs [a: 1]\n",
    "t: !custom x\n",
    "= : value-key\n",
    "when: 2013-10-04T14:32:14Z\nday: 2013-10-04\nno: no\nx: 0x1F\n",
    "b: !!binary aGVsbG8=\n",
    "[a, {b: c}]\n",
    "just text\n",
    "",
    "---\n...\n",
    "a: {b: [1, {c: ~}]}\n",
    "k: v\nk: w\n",  # a repeated key: the last one wins
    # plain scalars the loader resolves through its cache, twice each: the cached tag is reused
    "- [1, 1.5, .inf, -.Inf, .nan, 0o17, 0b101, 1_000, 12:30, yes, Off, ~, null, '', 2001-12-14]\n"
    "- [1, 1.5, .inf, -.Inf, .nan, 0o17, 0b101, 1_000, 12:30, yes, Off, ~, null, '', 2001-12-14]\n",
]


def _both_loaders(text: str):
    import yaml

    def load(loader):
        try:
            return ("value", yaml.load(text, Loader=loader))
        except yaml.YAMLError as exc:
            return ("error", type(exc).__name__, str(exc))

    return load(sidecar._Loader), load(sidecar._SafeLoader)


@pytest.mark.parametrize("text", _YAML_BY_HAND)
def test_sidecar_loader_equals_safeloader_by_hand(text):
    ours, pyyaml = _both_loaders(text)
    if ours[0] == "value" and ours[1] is not None and "&r" in text:
        assert repr(ours[1]) == repr(pyyaml[1])  # a recursive list equals nothing else
    else:
        assert ours == pyyaml


@given(_yaml_data, st.booleans())
def test_sidecar_loader_equals_safeloader(data, flow):
    import yaml

    text = yaml.safe_dump(data, default_flow_style=flow, allow_unicode=True)
    ours, pyyaml = _both_loaders(text)
    assert ours == pyyaml
    assert type(ours[1]) is type(pyyaml[1])
