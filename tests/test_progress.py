"""Progress of long work on a terminal (common/progress.py): `archive-service index` shows
the items done, the rate and the time left when stderr is a terminal, and nothing extra when
it is not (a pipe: a cron job's mail, a log)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

from serve_process import ROOT, SAMPLE

pytestmark = pytest.mark.process


def index(tmp_path, stderr_on_terminal: bool) -> tuple[str, str]:
    collection = tmp_path / "collection"
    if not collection.exists():
        shutil.copytree(SAMPLE, collection, symlinks=True)
    args = [sys.executable, "-m", "archive_service.cli", "index", "--collection", str(collection)]
    args += ["--state-dir", str(tmp_path / f"state-{stderr_on_terminal}")]
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


def test_index_on_a_terminal_shows_counts_rate_and_time_left(tmp_path):
    out, shown = index(tmp_path, stderr_on_terminal=True)
    assert "items served" in out
    assert "\rindex [" in shown, shown
    last = [draw for draw in shown.split("\r") if draw.startswith("index [")][-1]
    done, total = last.split("] ", 1)[1].split(" ", 1)[0].split("/")
    assert int(done) == int(total) > 0, last
    assert "/s, " in last and " left" in last, last


def test_index_piped_shows_nothing_extra(tmp_path):
    out, err = index(tmp_path, stderr_on_terminal=False)
    assert "items served" in out
    assert "\r" not in err and "index [" not in err, err
