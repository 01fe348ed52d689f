"""Removal-to-answer (issue 35): the promise "no URL for a file gone more than a second ago"
while workers reuse kept answers without looking at their files (indexer/vouch.py).

For each of `count` items the answer names a file of: keep asking for its answer (so the
workers keep it), move the file out of the collection, and time until three answers in a row
give no URL for it (both workers, most likely); then put it back and wait until it shows
again. Run by bench/run.py's change phase beside the sidecar edits."""

from __future__ import annotations

import os
import random
import time
from collections.abc import Callable
from pathlib import Path
from urllib.parse import unquote

import loadgen

TIMEOUT = 5.0  # a removal still answered with its URL after this is counted missed


def _url_of(body: bytes) -> bytes | None:
    for line in body.split(b"\r\n"):
        if line.startswith(b"url "):
            return line[4:]
    return None


def _until(port: int, path: str, shown: Callable[[bytes], bool], timeout: float) -> float | None:
    """Seconds until three answers in a row satisfy `shown`, or None."""
    started = time.perf_counter()
    streak, streak_start = 0, None
    while time.perf_counter() - started < timeout:
        status, body = loadgen.fetch(port, path)
        now = time.perf_counter() - started
        if status == 200 and shown(body):
            streak_start = now if streak == 0 else streak_start
            streak += 1
            if streak >= 3:
                return streak_start
        else:
            streak = 0
        time.sleep(0.005)
    return None


def removal(root: Path, port: int, entries: list[dict], url_request, count: int) -> dict:
    latencies: list[float] = []
    missed = 0
    aside = root.parent / f".removal-bench-{os.getpid()}"
    for entry in entries[:count]:
        path = url_request(entry["directory"])
        for _ in range(5):  # kept by the workers
            status, body = loadgen.fetch(port, path)
        url = _url_of(body) if status == 200 else None
        marker = f"/{entry['directory']}/doc/".encode()
        if url is None or marker not in url:
            continue
        relpath = url.split(marker, 1)[1].decode()
        file = root / entry["directory"] / "doc" / unquote(relpath)
        if not file.is_file():
            continue
        os.replace(file, aside)
        try:
            took = _until(port, path, lambda b, url=url: url not in b, TIMEOUT)
        finally:
            os.replace(aside, file)
        if took is None:
            missed += 1
        else:
            latencies.append(took)
        _until(port, path, lambda b, url=url: url in b, 30.0)
        time.sleep(random.uniform(0, 0.1))
    shown = len(latencies)
    return {
        "removals": shown + missed,
        "missed": missed,
        "timeout": TIMEOUT,
        "p50": loadgen.percentile(latencies, 0.5) if shown else None,
        "p99": loadgen.percentile(latencies, 0.99) if shown else None,
        "max": max(latencies) if shown else None,
    }
