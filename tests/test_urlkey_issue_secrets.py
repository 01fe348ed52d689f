"""Issuing a urlkey computes HMAC-SHA256 from SHA-256 states prepared once per secret
(urlkeys.UrlKeys): whatever the secret's length (a `urlkey.secret` file may hold up to 4 KB,
and HMAC hashes a key longer than SHA-256's 64-byte block first), each tag and the seal are
the HMACs the module documents, and keys verify."""

from __future__ import annotations

import hmac

import pytest

from archive_service.protocol.urlkeys import UrlKeys, canonical_url

URLS = [
    "http://archive.example/col/a/b/doc/x.pdf",
    "http://archive.example/sid.inpe.br/x/metadata/a/b?format=oai_dc",
]


@pytest.mark.parametrize("length", [16, 32, 63, 64, 65, 200, 4096])
def test_tags_and_seal_are_hmacs_whatever_the_secret_length(length: int) -> None:
    secret = bytes((7 * i + 3) % 256 for i in range(length))
    keys = UrlKeys(secret, clock=lambda: 1_700_000_000)

    def digits(message: bytes) -> str:
        mac = hmac.digest(secret, message, "sha256")
        return f"{int.from_bytes(mac, 'big') % 10**20:020d}"

    key = keys.issue(URLS)
    head, rest = key.split("-")
    tags, seal = rest[:-20], rest[-20:]
    assert tags == "".join(
        sorted(digits(b"urlkey/2\0tag\0" + head.encode() + b"\0" + canonical_url(u)) for u in URLS)
    )
    assert seal == digits(b"urlkey/2\0seal\0" + head.encode() + b"\0" + tags.encode())
    assert all(keys.verify(key, url).ok for url in URLS)
    assert not keys.verify(key, "http://archive.example/col/a/b/doc/y.pdf").ok
