"""A urlkey is exactly what urlkeys.py documents: tags and seal are the first 20 decimal
digits of HMAC-SHA256 under the Archive's secret, over the documented messages. Keys issued
before a restart (or by another worker, or another version of this code) must verify, so
however issuing is made faster, its output must not move."""

from __future__ import annotations

import hmac

import pytest

from archive_service.protocol.urlkeys import UrlKeys, canonical_url

SECRET = bytes(range(32))


def digits(message: bytes) -> str:
    mac = hmac.digest(SECRET, message, "sha256")
    return f"{int.from_bytes(mac, 'big') % 10**20:020d}"


@pytest.mark.parametrize(
    "urls",
    [
        [],
        ["http://archive.example/col/a/b/doc/x.pdf"],
        [
            "http://archive.example/col/a/b/doc/x.pdf",
            "http://ARCHIVE.example:80/col/c/d/doc/y",
            "http://archive.example/col/a/b/doc/Relat%f3rio%20Final.pdf",
        ],
    ],
)
def test_issued_keys_are_the_documented_hmacs(urls: list[str]) -> None:
    keys = UrlKeys(SECRET, clock=lambda: 1_700_000_000)
    for _ in range(3):
        key = keys.issue(urls)
        head, rest = key.split("-")
        assert head.startswith("1700000000") and len(head) == 22
        tags, seal = rest[:-20], rest[-20:]
        expected = sorted(
            {
                digits(b"urlkey/2\0tag\0" + head.encode() + b"\0" + c)
                for c in {canonical_url(u) for u in urls} or {b""}
            }
        )
        assert [tags[i : i + 20] for i in range(0, len(tags), 20)] == expected
        assert seal == digits(b"urlkey/2\0seal\0" + head.encode() + b"\0" + tags.encode())
        for url in urls:
            assert keys.verify(key, url).ok
