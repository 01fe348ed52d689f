"""File names as the bytes on disk, the same in every process whatever its locale.

The kit keeps a name as text one way: its bytes decoded as UTF-8, any byte that is not
UTF-8 as a lone surrogate (`surrogateescape`). Sidecars, URLs, pages and the index all use
it. Python's os functions take and give names in the file-system encoding instead, which is
that same convention only when it is UTF-8: a `python` command always has it (UTF-8 mode or
locale coercion under LANG=C), but an interpreter embedded under LANG=C (mod_wsgi under
Debian's /etc/apache2/envvars) has ASCII, and a Latin-1 locale has Latin-1. A name crosses
between the two here, and only where it meets the disk (collection/items.py)."""

from __future__ import annotations

import codecs
import os
import sys

# Checked once: the encoding is fixed when the interpreter starts.
NATIVE = codecs.lookup(sys.getfilesystemencoding()).name == "utf-8"


def to_os(name: str) -> str:
    """A name as kept (UTF-8 text) as the os functions take it."""
    return name if NATIVE else os.fsdecode(name.encode("utf-8", "surrogateescape"))


def from_os(name: str) -> str:
    """A name as the os functions give it, as kept (UTF-8 text)."""
    return name if NATIVE else os.fsencode(name).decode("utf-8", "surrogateescape")


def from_bytes(raw: bytes) -> str:
    """A name's bytes (a URL's percent-decoded path) as kept."""
    return raw.decode("utf-8", "surrogateescape")
