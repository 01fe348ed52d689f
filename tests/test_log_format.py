"""One log format for gunicorn, the service and its helper processes (the announcer, the
indexer); under systemd (JOURNAL_STREAM set) without a timestamp, which journald adds."""

from __future__ import annotations

import re

import pytest

from resolver_double import ResolverDouble
from serve_process import ANNOUNCING, Serve

pytestmark = pytest.mark.process

STAMP = r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} "
LINE = r"\[(?P<pid>\d+)\] (?P<level>DEBUG|INFO|WARNING|ERROR|CRITICAL) (?P<name>[\w.]+): \S"
WHO = {
    "gunicorn": "Booting worker",
    "announcer": "status.archive included",
    "indexer": "watching",
    "service": "indexed",
}


def log_lines(serve: Serve) -> list[str]:
    # The access log (one line per request, Apache's combined format) is a log of its own.
    return [line for line in serve.log().splitlines() if line and '"GET ' not in line]


@pytest.mark.parametrize("journal", [False, True])
def test_every_process_logs_in_one_format(tmp_path, journal):
    resolver = ResolverDouble().start()
    env = {"ARCHIVE_SERVICE_REGISTRATIONKEY": "5550001234-9990004321"}
    if journal:
        env["JOURNAL_STREAM"] = "8:12345"
    serve = Serve(
        tmp_path,
        "--state-dir",
        str(tmp_path / "state"),
        "--resolver",
        resolver.url,
        *ANNOUNCING,
        env=env,
    )
    try:
        serve.wait_answering()
        resolver.wait_for(1, "inclusionRequest")
        serve.wait_log("status.archive included")
        serve.wait_log("watching")
    finally:
        serve.stop()
        resolver.stop()
    pattern = re.compile(("" if journal else STAMP) + LINE)
    lines = log_lines(serve)
    odd = [line for line in lines if not pattern.match(line)]
    assert not odd, "\n".join(odd)
    pids = {}
    for who, text in WHO.items():
        found = [line for line in lines if text in line]
        assert found, (who, "\n".join(lines))
        pids[who] = pattern.match(found[0])["pid"]
    assert pids["announcer"] != pids["gunicorn"]  # a helper process, same format
