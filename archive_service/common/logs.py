"""The one log format of every process of ours: the `serve` master and gunicorn, the workers,
the indexer, the announcer and the commands. Under systemd (JOURNAL_STREAM set) a line has
no timestamp: journald stamps each line itself."""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Mapping

FORMAT = "%(asctime)s [%(process)d] %(levelname)s %(name)s: %(message)s"
JOURNAL_FORMAT = "[%(process)d] %(levelname)s %(name)s: %(message)s"


def line_format(environ: Mapping[str, str] | None = None) -> str:
    environ = os.environ if environ is None else environ
    return JOURNAL_FORMAT if environ.get("JOURNAL_STREAM") else FORMAT


def configure() -> None:
    """Log INFO and above to stderr in the one format."""
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format=line_format())


def shown(text: str) -> str:
    """`text` for a terminal or a log: ids, names and values come from someone else's files
    or server, and a line break or an escape sequence in them would forge a line of ours
    ("skipped: ...") or drive the admin's terminal."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else ascii(c)[1:-1] for c in text)
