"""The COUNTER API's key never reaches a log (issue 20): a real `archive-service serve` with
`counter_api_key` set, asked with the key in the query string (where COUNTER_SUSHI puts it),
logs the request without the key, whether the key is right or wrong, and however its
parameter's name is percent-encoded (Werkzeug decodes every escape of a name)."""

from __future__ import annotations

from pathlib import Path

import pytest

from archive_service.common.worker import redact
from serve_process import http_get, serve_collection
from support import SERVICE

KEY = "k3y-0f-the-harvester-7f1c"
# Spellings of the name api_key that Werkzeug takes as api_key.
NAMES = ("api_key", "api%5Fkey", "%61pi_key", "api_ke%79", "%61%70%69%5f%6b%65%79")


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize(
    "line",
    [
        "GET /s/r51/reports/ir?begin_date=2026-01&{}=KEY&end_date=2026-01 HTTP/1.1",
        "{}=KEY",
        "a=1;{}=KEY",
    ],
)
def test_every_spelling_of_the_name_is_redacted(name, line):
    shown = redact(line.format(name).replace("KEY", KEY))
    assert KEY not in shown and f"{name}=<secret>" in shown
    assert redact(line.format("api_keys").replace("KEY", KEY)) == line.format("api_keys").replace(
        "KEY", KEY
    )


@pytest.mark.process
def test_the_api_key_is_not_logged(collection: Path, tmp_path: Path):
    serve = serve_collection(
        tmp_path, collection, tmp_path / "state", env={"ARCHIVE_SERVICE_COUNTER_API_KEY": KEY}
    )
    try:
        serve.wait_answering(timeout=60)
        base = f"http://{serve.address}/{SERVICE}/r51/reports/ir?begin_date=2026-01"
        for key in (KEY, KEY + "x"):
            http_get(f"{base}&end_date=2026-01&api_key={key}")
        for name in NAMES[1:]:
            status, _, _ = http_get(f"{base}&end_date=2026-01&{name}={KEY}")
            assert status == 200  # taken as the key
        serve.wait_log("end_date=2026-01&", count=len(NAMES) + 1)
        assert serve.stop() == 0
    finally:
        serve.kill()
    log = serve.log()
    assert "api_key=<secret>" in log and "%61pi_key=<secret>" in log
    assert KEY not in log, [line for line in log.splitlines() if KEY in line]
