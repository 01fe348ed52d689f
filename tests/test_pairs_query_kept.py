"""pairs.parse_query keeps the decoding of short escaped parts (resolvers repeat them):
a kept decoding is the same as a fresh one, and long parts, decoded each time, too."""

from __future__ import annotations

from urllib.parse import parse_qsl, quote

from archive_service.protocol import pairs


def test_repeated_and_long_escaped_parts_decode_as_parse_qsl() -> None:
    short = quote("sid.inpe.br/mtc-m18@80/2008/03.17.15.17", safe="")
    long = quote("x/é" * 200, safe="") + "%E9+%zz"
    for query in (
        f"ibi={short}&a=1",
        f"ibi={short}&a=2",
        f"{short}=v&ibi={long}",
        f"ibi={long}&b={short}",
        f"ibi={long}&b={short}",
    ):
        expected = dict(parse_qsl(query, keep_blank_values=True, errors="surrogateescape"))
        assert pairs.parse_query(query) == expected
