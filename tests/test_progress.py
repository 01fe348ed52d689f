"""Progress of long work on a terminal (common/progress.py): `archive-service index` shows
the items done, the rate and the time left when stderr is a terminal, and nothing extra when
it is not (a pipe: a cron job's mail, a log)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

from archive_service.stores import stats
from archive_service.stores.stats import counter
from serve_process import ROOT, SAMPLE

pytestmark = pytest.mark.process


def run(args: list[str], stderr_on_terminal: bool) -> tuple[str, str]:
    """(stdout, what stderr showed) of `archive-service ARGS`, its stderr a terminal or a pipe."""
    args = [sys.executable, "-m", "archive_service.cli", *args]
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    if not stderr_on_terminal:
        done = subprocess.run(args, capture_output=True, env=env, timeout=60, cwd=ROOT)
        assert done.returncode == 0, done.stderr
        return done.stdout.decode(), done.stderr.decode()
    leader, follower = os.openpty()
    try:
        proc = subprocess.Popen(
            args,
            stdout=subprocess.PIPE,
            stderr=follower,
            env=env,
            cwd=ROOT,
            stdin=subprocess.DEVNULL,
        )
        os.close(follower)
        follower = -1
        shown = b""
        while True:
            try:
                chunk = os.read(leader, 65536)
            except OSError:  # EIO: the child closed the terminal's last descriptor
                break
            if not chunk:
                break
            shown += chunk
        with proc.stdout:
            out = proc.stdout.read().decode()
        assert proc.wait(timeout=60) == 0, shown
    finally:
        os.close(leader)
        if follower >= 0:
            os.close(follower)
    return out, shown.decode()


def index(tmp_path, stderr_on_terminal: bool) -> tuple[str, str]:
    collection = tmp_path / "collection"
    if not collection.exists():
        shutil.copytree(SAMPLE, collection, symlinks=True)
    state = tmp_path / f"state-{stderr_on_terminal}"
    return run(
        ["index", "--collection", str(collection), "--state-dir", str(state)], stderr_on_terminal
    )


def last_drawn(shown: str, label: str) -> tuple[int, int, str]:
    """(done, total, the line) of the last draw of the bar `label`."""
    assert f"\r{label} [" in shown, shown
    last = [draw for draw in shown.split("\r") if draw.startswith(f"{label} [")][-1]
    done, total = last.split("] ", 1)[1].split(" ", 1)[0].split("/")
    return int(done), int(total), last


def test_index_on_a_terminal_shows_counts_rate_and_time_left(tmp_path):
    out, shown = index(tmp_path, stderr_on_terminal=True)
    assert "items served" in out
    done, total, last = last_drawn(shown, "index")
    assert done == total > 0, last
    assert "/s, " in last and " left" in last, last


def test_index_piped_shows_nothing_extra(tmp_path):
    out, err = index(tmp_path, stderr_on_terminal=False)
    assert "items served" in out
    assert "\r" not in err and "index [" not in err, err


@pytest.mark.parametrize("terminal", [True, False])
def test_an_item_report_shows_the_days_read_on_a_terminal_only(tmp_path, terminal):
    """`stats --report ir` over years of days reads each day (issue 36): on a terminal it
    shows how many, with the rate and the time left; piped, its TSV and nothing else."""
    state = tmp_path / "state"
    store = stats.open_store(str(state), None)
    store.record_use(stats.Seen("8JMKD3MGP8W/35MMLL8", counter.REQUEST, "192.0.2.1", "x"))
    store.close()  # written: the report reads days only from a store that has some
    args = ["stats", "--collection", str(SAMPLE), "--state-dir", str(state), "--report", "ir"]
    out, shown = run([*args, "--begin", "2024-01", "--end", "2026-10"], terminal)
    assert "Report_Name" in out or "Item Report" in out, out[:300]
    if terminal:
        done, total, last = last_drawn(shown, "report")
        assert done == total > 800, last  # the days of 34 months
    else:
        assert "\r" not in shown and "report [" not in shown, shown
