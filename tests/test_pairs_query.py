"""pairs.parse_query decodes exactly as urllib's parse_qsl (keep_blank_values, UTF-8 with
surrogateescape) does, names given twice refused: its fast path must not change a value."""

from __future__ import annotations

from urllib.parse import parse_qsl

import pytest
from hypothesis import given
from hypothesis import strategies as st

from archive_service.protocol import pairs

# Query-string pieces as clients send them: escapes (valid, broken, non-UTF-8), "+", "=",
# "&" runs, empty names and values.
_PIECE = st.sampled_from(
    [
        "a",
        "b",
        "ibi",
        "=",
        "&",
        "&&",
        "+",
        "%",
        "%2",
        "%2F",
        "%2f",
        "%20",
        "%C3%A9",
        "%E9",
        "%zz",
        "x.y",
        "{",
        "~",
        ";",
        "%2B",
        "%26",
        "%3D",
        "",
        "é",
    ]
)


def reference(query: str) -> dict[str, str] | str:
    try:
        query.encode("ascii")
    except UnicodeEncodeError:
        return "error"
    result: dict[str, str] = {}
    for name, value in parse_qsl(
        query, keep_blank_values=True, encoding="utf-8", errors="surrogateescape"
    ):
        if name in result:
            return "error"
        result[name] = value
    return result


def ours(query: str) -> dict[str, str] | str:
    try:
        return pairs.parse_query(query)
    except pairs.PairsError:
        return "error"


@given(st.lists(_PIECE, max_size=12).map("".join))
def test_parse_query_decodes_as_parse_qsl(query: str) -> None:
    assert ours(query) == reference(query)


@pytest.mark.parametrize(
    "query",
    [
        "servicesubject=urlRequest&clientinformation.ipaddress=150.163.2.174&parsedibiurl.ibi="
        "dpi.inpe.br%2Fbanon%2F2001%2F04.03.15.18&parsedibiurl.verblist=GetLastEdition%20"
        "GetTranslation%20GetMetadata%28oai_dc%29",
        "a=1&&b&c=&=d&e+f=g+h&url=http://x/Relat%f3rio%20Final.pdf",
    ],
)
def test_parse_query_examples(query: str) -> None:
    assert ours(query) == reference(query)
