"""The COUNTER API's key never reaches a log (issue 20): a real `archive-service serve` with
`counter_api_key` set, asked with the key in the query string (where COUNTER_SUSHI puts it),
logs the request without the key, whether the key is right or wrong."""

from __future__ import annotations

from pathlib import Path

import pytest

from serve_process import http_get, serve_collection
from support import SERVICE

pytestmark = pytest.mark.process

KEY = "k3y-0f-the-harvester-7f1c"


def test_the_api_key_is_not_logged(collection: Path, tmp_path: Path):
    serve = serve_collection(
        tmp_path, collection, tmp_path / "state", env={"ARCHIVE_SERVICE_COUNTER_API_KEY": KEY}
    )
    try:
        serve.wait_answering(timeout=60)
        base = f"http://{serve.address}/{SERVICE}/r51/reports/ir?begin_date=2026-01"
        for key in (KEY, KEY + "x"):
            http_get(f"{base}&end_date=2026-01&api_key={key}")
        serve.wait_log("end_date=2026-01&api_key=", count=2)
        assert serve.stop() == 0
    finally:
        serve.kill()
    log = serve.log()
    assert "api_key=<secret>" in log
    assert KEY not in log, [line for line in log.splitlines() if KEY in line]
