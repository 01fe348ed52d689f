"""Persistent URLs (§6.1): Table 6.1's grammar, every modifier of Table 6.2, Table 6.3's pairs."""

from __future__ import annotations

import pytest

from archive_service.resolver import purl
from archive_service.resolver.purl import PurlError

L, T, M = "GetLastEdition", "GetTranslation", "GetMetadata"

# Table 6.2, in its order: modifier -> verbs (Table 6.5) -> relation shape.
TABLE_6_2 = [
    (":", [M], "m"),
    (":+", [M, T], "mt"),
    ("!", [L], "u"),
    ("!+", [L, T], "ut"),
    ("!:", [L, M], "um"),
    ("!+:", [L, T, M], "utm"),
    ("!:+", [L, M, T], "umt"),
    ("!+:+", [L, T, M, T], "utmt"),
    ("+", [T], "t"),
    ("+!", [T, L], "tu"),
    ("+:", [T, M], "tm"),
    ("+!:", [T, L, M], "tum"),
    ("+:+", [T, M, T], "tmt"),
    ("+!:+", [T, L, M, T], "tumt"),
]


@pytest.mark.parametrize("mdf,verbs,shape", TABLE_6_2, ids=[m for m, _, _ in TABLE_6_2])
def test_every_modifier_of_table_6_2(mdf, verbs, shape):
    parsed = purl.parse("8JMKD3MGP8W/35MME4E" + mdf)
    assert parsed.ibi == "8JMKD3MGP8W/35MME4E"
    assert parsed.modifier == mdf
    assert list(parsed.verbs) == verbs
    assert "".join(step.kind for step in parsed.parsed.relation) == shape
    assert parsed.filepath is None


@pytest.mark.parametrize("mdf,verbs,shape", TABLE_6_2, ids=[m for m, _, _ in TABLE_6_2])
def test_every_modifier_with_parameters_and_a_path_after_a_repository_name(mdf, verbs, shape):
    written = mdf.replace("+", "+(pt-BR)", 1).replace(":", ":(oai_dc)")
    parsed = purl.parse("iconet.com.br/banon/2009/09.09.22.01" + written + "/doc/a b.pdf")
    assert parsed.ibi == "iconet.com.br/banon/2009/09.09.22.01"
    assert parsed.modifier == written
    assert parsed.filepath == "/doc/a b.pdf"
    expected = [v for v in verbs]
    if T in expected:
        expected[expected.index(T)] = "GetTranslation(pt-BR)"
    expected = ["GetMetadata(oai_dc)" if v == M else v for v in expected]
    assert list(parsed.verbs) == expected


@pytest.mark.parametrize(
    "path,ibi,filepath",
    [
        ("8JMKD3MGP8W/35MME4E", "8JMKD3MGP8W/35MME4E", None),  # Example 6.1
        ("8JMKD3MGP8W/35MMLL8", "8JMKD3MGP8W/35MMLL8", None),
        ("LK47B6W/362SFKH", "LK47B6W/362SFKH", None),
        ("iconet.com.br/banon/2009/09.09.22.01", "iconet.com.br/banon/2009/09.09.22.01", None),
        ("LK47B6W/362SFKH/reference.bib", "LK47B6W/362SFKH", "/reference.bib"),  # Example 6.7
        # An IBIp followed by a path of two segments is not taken for a repository name.
        ("LK47B6W/362SFKH/doc/reference.bib", "LK47B6W/362SFKH", "/doc/reference.bib"),
        ("lk47b6w/362sfkh", "lk47b6w/362sfkh", None),  # case-insensitive, kept as written
        (
            "sid.inpe.br/mtc-m18@80/2009/07.21.13.23.47:",
            "sid.inpe.br/mtc-m18@80/2009/07.21.13.23.47",
            None,
        ),
        ("LK47B6W/362SFKH/", "LK47B6W/362SFKH", None),  # a bare "/" names no file
    ],
)
def test_ibi_and_path(path, ibi, filepath):
    parsed = purl.parse(path)
    assert (parsed.ibi, parsed.filepath) == (ibi, filepath)


def test_example_6_5_verblist_is_the_same_as_the_modifier():
    by_query = purl.parse(
        "8JMKD3MGP8W/35MMLL8", "ibiurl.verblist=GetLastEdition+GetMetadata(oai_dc)"
    )
    by_modifier = purl.parse("8JMKD3MGP8W/35MMLL8!:(oai_dc)")
    assert by_query.verbs == by_modifier.verbs == ("GetLastEdition", "GetMetadata(oai_dc)")
    assert by_query.parsed == by_modifier.parsed
    assert by_query.verblist == "GetLastEdition GetMetadata(oai_dc)"  # Example 8.2


def test_example_6_6_file_list():
    parsed = purl.parse("LK47B6W/362SFKH", "ibiurl.verblist=GetFileList")
    assert parsed.parsed.filelist and parsed.parsed.relation == ()


def test_example_6_8_union_of_modifier_and_verblist_and_required_status():
    parsed = purl.parse(
        "LK47B6W/362SFKH+", "ibiurl.requireditemstatus=Original&ibiurl.verblist=GetMetadata"
    )
    assert parsed.verblist == "GetTranslation GetMetadata"  # Table 6.8
    assert parsed.requireditemstatus == "Original"


def test_union_drops_a_verb_given_twice_and_keeps_the_modifier_order():
    parsed = purl.parse("8JMKD3MGP8W/35MMLL8!", "ibiurl.verblist=GetLastEdition+GetFileList")
    assert parsed.verbs == ("GetLastEdition", "GetFileList")
    # %2B is a literal "+" between verbs, as Table 6.4 writes them.
    assert purl.parse(
        "8JMKD3MGP8W/35MMLL8", "ibiurl.verblist=GetLastEdition%2BGetMetadata"
    ).verbs == ("GetLastEdition", "GetMetadata")


def test_pairs_for_the_item_pass_through_untouched():
    parsed = purl.parse("LK47B6W/362SFKH", "q=a%20b&ibiurl.verblist=GetFileList&page=2")
    assert parsed.passthrough == "q=a%20b&page=2"
    assert parsed.verbs == ("GetFileList",)


@pytest.mark.parametrize(
    "path,query,message",
    [
        ("", "", "no IBI"),
        ("8JMKD3MGP8W", "", "does not start with an IBI"),
        ("foo.example/bar/2009/13.45.00.00", "", "not a UTC date"),
        ("8JMKD3MGP8W/35MMLL0", "", "breaks rule palavra"),  # 0 is not an IBIp digit
        ("8JMKD3MGP8W/35MMLL8!!", "", "is not one of Table 6.2"),
        ("8JMKD3MGP8W/35MMLL8:!", "", "is not one of Table 6.2"),
        ("8JMKD3MGP8W/35MMLL8::", "", "is not one of Table 6.2"),
        ("8JMKD3MGP8W/35MMLL8+!+", "", "is not one of Table 6.2"),
        ("8JMKD3MGP8W/35MMLL8:+:", "", "is not one of Table 6.2"),
        ("8JMKD3MGP8W/35MMLL8+(pt-br)", "", "2-capital-letter country"),
        ("8JMKD3MGP8W/35MMLL8+(portuguese)", "", "2 small letters"),
        ("8JMKD3MGP8W/35MMLL8:(marc)", "", "the one format is oai_dc"),
        ("8JMKD3MGP8W/35MMLL8!x", "", "'x' at character 2"),
        ("LK47B6W/362SFKH/../x", "", "leaves the item"),
        ("LK47B6W/362SFKH", "ibiurl.requireditemstatus=Copy", "the one value is Original"),
        ("LK47B6W/362SFKH", "ibiurl.verblist=GetEverything", "unknown verb GetEverything"),
        ("LK47B6W/362SFKH", "ibiurl.verblist=GetMetadata+GetLastEdition", "no relation"),
        ("LK47B6W/362SFKH:", "ibiurl.verblist=GetLastEdition", "no relation"),
        ("LK47B6W/362SFKH", "ibiurl.colour=red", "unknown query pair ibiurl.colour"),
        (
            "LK47B6W/362SFKH",
            "ibiurl.verblist=GetFileList&ibiurl.verblist=GetMetadata",
            "more than once",
        ),
        ("LK47B6W/362SFKH", "q=\u00e9", "not ASCII"),
    ],
)
def test_bad_persistent_urls_say_what_is_wrong(path, query, message):
    with pytest.raises(PurlError, match=message.replace("(", r"\(").replace(")", r"\)")):
        purl.parse(path, query)


def test_required_status_is_case_insensitive_and_normalised():
    assert (
        purl.parse("LK47B6W/362SFKH", "ibiurl.requireditemstatus=original").requireditemstatus
        == "Original"
    )


@pytest.mark.parametrize(
    "query", ["%69biurl.requireditemstatus=Original", "ibiurl%2Erequireditemstatus=Original"]
)
def test_the_resolvers_pairs_are_its_own_however_percent_encoded(query):
    """`%69` is `i` (RFC 3986 §2.3): the pair was taken for the item's, so the requirement of
    the Original was ignored and went on to the Archive in the URL the user was sent to."""
    parsed = purl.parse("LK47B6W/362SFKH", query + "&page=2")
    assert parsed.requireditemstatus == "Original"
    assert parsed.passthrough == "page=2"
    with pytest.raises(PurlError, match="the one value is Original"):
        purl.parse("LK47B6W/362SFKH", query.replace("Original", "Copy"))


@pytest.mark.parametrize("query", ["?", "info"])
@pytest.mark.parametrize(
    "path, verbs",
    [
        ("8JMKD3MGP8W/35MMLL8", ("GetMetadata",)),
        ("8JMKD3MGP8W/35MMLL8!", ("GetLastEdition", "GetMetadata")),
        ("8JMKD3MGP8W/35MMLL8:", ("GetMetadata",)),  # already the metadata: no second ":"
    ],
)
def test_the_metadata_inflections_ask_what_the_colon_asks(query, path, verbs):
    """Issue 32: `<persistent URL>??` (seed 003, N2T/ARK; WSGI's query is the second "?")
    and `?info` are the item's metadata, as `:` is; nothing is passed on to the item."""
    parsed = purl.parse(path, query)
    assert parsed.verbs == verbs and parsed.passthrough == ""
    assert parsed.parsed == purl.parse(path if path.endswith(":") else path + ":").parsed


def test_other_queries_are_still_the_items():
    assert purl.parse("8JMKD3MGP8W/35MMLL8", "information=1").passthrough == "information=1"
    assert purl.parse("8JMKD3MGP8W/35MMLL8", "info=").verbs == ()
