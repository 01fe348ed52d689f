"""The one log format of every process of ours: the `serve` master and gunicorn, the workers,
the indexer, the announcer, the resolver and the commands. `text` (the default): one line a
record, without a timestamp under systemd (JOURNAL_STREAM set: journald stamps each line
itself); `json` (the `log_format` setting): one JSON object a line, for a log collector."""

from __future__ import annotations

import json
import logging
import os
import sys
from collections.abc import Mapping
from datetime import UTC, datetime

FORMAT = "%(asctime)s [%(process)d] %(levelname)s %(name)s: %(message)s"
JOURNAL_FORMAT = "[%(process)d] %(levelname)s %(name)s: %(message)s"
FORMATS = ("text", "json")
# The Archive's setting as a variable of the environment: how a process of ours started by
# another (the indexer, the announcer: common/processes.py) logs as its parent does.
ENV = "ARCHIVE_SERVICE_LOG_FORMAT"

_chosen = "text"
_handler: logging.Handler | None = None


def line_format(environ: Mapping[str, str] | None = None) -> str:
    environ = os.environ if environ is None else environ
    return JOURNAL_FORMAT if environ.get("JOURNAL_STREAM") else FORMAT


def stamp(seconds: float) -> str:
    """A moment as a JSON line gives it: ISO 8601 in UTC, to the millisecond."""
    return datetime.fromtimestamp(seconds, UTC).isoformat(timespec="milliseconds")


def json_line(fields: dict) -> str:
    # ASCII only: a name or value from someone else's file cannot drive a terminal that
    # shows the log (json escapes control characters, ensure_ascii every other non-ASCII).
    return json.dumps(fields, default=str)


class JsonFormatter(logging.Formatter):
    """A record as one JSON object: time, level, logger, message, pid (and the traceback, as
    `exception`). The standard library's: the fields are few and fixed, and the access log,
    the busiest, builds its objects itself (common/access.py)."""

    def format(self, record: logging.LogRecord) -> str:
        fields = {
            "time": stamp(record.created),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
            "pid": record.process,
        }
        if record.exc_info:
            fields["exception"] = self.formatException(record.exc_info)
        if record.stack_info:
            fields["stack"] = self.formatStack(record.stack_info)
        return json_line(fields)


def chosen() -> str:
    """The format this process logs in: the one given to `configure`, else its parent's."""
    return _chosen


def formatter(datefmt: str | None = None) -> logging.Formatter:
    if _chosen == "json":
        return JsonFormatter()
    return logging.Formatter(line_format(), datefmt)


def configure(log_format: str | None = None) -> None:
    """Log INFO and above to stderr in the one format: `log_format`, else the parent's
    (ENV), else text. Called again once the settings are read (cli/options.py)."""
    global _chosen, _handler
    inherited = os.environ.get(ENV, "")
    _chosen = log_format or (inherited if inherited in FORMATS else "text")
    if _handler is None:
        _handler = logging.StreamHandler(sys.stderr)
        logging.basicConfig(level=logging.INFO, handlers=[_handler])
    _handler.setFormatter(formatter())


def shown(text: str) -> str:
    """`text` for a terminal or a log: ids, names and values come from someone else's files
    or server, and a line break or an escape sequence in them would forge a line of ours
    ("skipped: ...") or drive the admin's terminal."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else ascii(c)[1:-1] for c in text)
