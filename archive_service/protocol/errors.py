"""The protocol's error answer, shared by the Archive and the resolver."""

from __future__ import annotations

from . import pairs


class RequestError(ValueError):
    """A malformed request: HTTP 400 with `error {reason}` (SPEC §4, Contract)."""


def error_body(reason: str) -> str:
    """The protocol's error: a pairs body `error {words}` (SPEC §4, Contract)."""
    words = "".join(c if c.isascii() and c.isprintable() and c not in "{}" else " " for c in reason)
    return pairs.render([("error", pairs.value_list(words.split()))])
