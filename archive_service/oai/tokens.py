"""OAI-PMH resumption tokens that need no state: the list request's arguments (verb,
metadataPrefix, set, from, until) and the keyset position (datestamp, key) reached, its
cursor and completeListSize, as compact JSON, base64url, with an HMAC-SHA256 tag (128 bits)
under a key derived from the Archive's URL-key secret (protocol/urlkeys.py `derive`): every
node of one Archive reads every node's tokens, before and after a restart, and they do not
expire (a position stays meaningful: rows only move forward in datestamp order). A token
changed in any byte, or made with another key, is refused (badResumptionToken)."""

from __future__ import annotations

import base64
import binascii
import hmac
import json
from typing import Any

PURPOSE = "oai-pmh resumption token v1"
VERSION = "1"
TAG_BYTES = 16
MAX_TOKEN = 2048  # far above any token issued (set and dates are bounded by the request's)


class BadToken(ValueError):
    """A resumption token this Archive did not issue, or changed since."""


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


class Tokens:
    def __init__(self, key: bytes):
        self._key = key

    def _tag(self, body: str) -> bytes:
        return hmac.digest(self._key, body.encode("ascii"), "sha256")[:TAG_BYTES]

    def issue(self, state: dict[str, Any]) -> str:
        body = VERSION + "." + _b64(json.dumps(state, separators=(",", ":")).encode())
        return body + "." + _b64(self._tag(body))

    def read(self, token: str) -> dict[str, Any]:
        """The state `issue` signed, or BadToken saying why not."""
        if len(token) > MAX_TOKEN or not token.isascii():
            raise BadToken("the resumptionToken is not one this Archive issued")
        body, _, tag = token.rpartition(".")
        version = body.partition(".")[0]
        if version != VERSION:
            raise BadToken("the resumptionToken is not one this Archive issued")
        try:
            good = hmac.compare_digest(_unb64(tag), self._tag(body))
            state = json.loads(_unb64(body.partition(".")[2])) if good else None
        except (binascii.Error, ValueError):
            good = False
        if not good or not isinstance(state, dict):
            raise BadToken("the resumptionToken was changed or made by another Archive")
        return state
