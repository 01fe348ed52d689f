"""The benchmark harness still runs end to end (issue 7). It measures nothing here: a tiny
collection, one short round of each figure, and a check that the table it writes is whole.
No timing is asserted (benchmarks are not tests; see bench/README.md)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.process

ROOT = Path(__file__).resolve().parent.parent
BEGIN, END = "<!-- bench:begin -->", "<!-- bench:end -->"
FIGURES = (
    "urlRequest throughput",
    "one full answer repeated",
    "raw WSGI callable",
    "urlRequest p99",
    "cold index build",
    "warm start",
    "change-to-answer",
    "peak RSS per worker",
    "cost growth",
)


@pytest.mark.slow
def test_smoke_run_writes_a_well_formed_table(tmp_path: Path) -> None:
    readme = tmp_path / "README.md"
    readme.write_text(f"# Project\n\nbefore\n{BEGIN}\nstale table\n{END}\nafter\n")
    results = tmp_path / "RESULTS.md"
    done = subprocess.run(
        [
            sys.executable,
            str(ROOT / "bench" / "run.py"),
            "--items",
            "200",
            "--smoke",
            "--cache",
            str(tmp_path / "cache"),
            "--results-dir",
            str(tmp_path / "json"),
            "--results",
            str(results),
            "--readme",
            str(readme),
        ],
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert done.returncode == 0, done.stderr[-3000:]

    text = results.read_text()
    assert text.count(BEGIN) == 1 and text.count(END) == 1
    table = text[text.index(BEGIN) + len(BEGIN) : text.index(END)].strip().splitlines()
    rows = [line for line in table if line.startswith("|")]
    assert rows[0].startswith("| figure | target | 200 items |")
    assert re.fullmatch(r"\|( --- \|){3}", rows[1])
    for figure in FIGURES:
        row = next((r for r in rows if figure in r), None)
        assert row is not None, f"no row for {figure}"
        assert row.count("|") == 4, row
    throughput = next(r for r in rows if "urlRequest throughput" in r)
    assert re.search(r"[0-9.]+× [✓✗] \([0-9,]+ vs [0-9,]+ req/s\)", throughput), throughput
    raw = next(r for r in rows if "raw WSGI callable" in r)
    assert re.search(
        r"[0-9.]+× [✓✗] \([0-9,]+ vs [0-9,]+ req/s; one answer repeated "
        r"[0-9.]+×\)",
        raw,
    ), raw

    # The README keeps its own text around the markers, the table replaces the stale one.
    updated = readme.read_text()
    assert updated.startswith("# Project\n\nbefore\n") and updated.endswith("\nafter\n")
    assert "stale table" not in updated and "| figure | target | 200 items |" in updated

    result = json.loads((tmp_path / "json" / "200-smoke.json").read_text())
    assert result["items"] == 200 and result["smoke"] is True
    assert result["throughput"]["failed"] == 0
    assert result["throughput_wsgi"]["floor_median"] > 0
