"""`GET /health`: whether this Archive can answer, as JSON for load balancers and monitoring.

It can answer (200) when its index reads and is not damaged, and its state directory takes
writes (the URL-key secret and the statistics live there: without it acknowledgments are
not counted); else 503, with each problem in one line. The index's freshness and the
inclusion in the resolver are reported, not judged: a stale index still answers, and an
Archive not (yet) included still serves its files."""

from __future__ import annotations

import os
import sqlite3
import tempfile
import time
from dataclasses import asdict
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ..index.store import Store
from ..protocol.urlkeys import UrlKeys
from ..serve import inclusion
from . import stats


def iso(seconds: float | None) -> str | None:
    """A time for people and JSON: ISO 8601 in UTC, to the second."""
    if not seconds:
        return None
    return datetime.fromtimestamp(seconds, UTC).isoformat(timespec="seconds")


def write_problem(directory: str | os.PathLike) -> str | None:
    """Why a file cannot be created in `directory` now, or None: a real write (permission
    bits say nothing to root, and a file system remounted read-only keeps them)."""
    try:
        with tempfile.TemporaryFile(dir=directory, prefix=".health-"):
            return None
    except OSError as exc:
        return f"cannot write in {directory}: {exc.strerror or exc}"


def indexer_state(store: Store, *, process: bool = True) -> str | None:
    """What the indexer last wrote of itself (`<pid> watching|polling|stopped <time>`), for
    people: 'watching since …'; its process id for the operator only (`process`)."""
    note = store.meta().get("indexer", "")
    parts = note.split(" ")
    if len(parts) != 3 or not parts[2].isdigit():
        return None
    said = f"{parts[1]} since {iso(float(parts[2]))}"
    return f"{said} (process {parts[0]})" if process else said


def check(
    catalog, store: Store, state_dir: str, counts: stats.Store, keys: UrlKeys
) -> tuple[int, dict[str, Any]]:
    """(HTTP status, JSON body) of the health check, read inside a request (catalog.begin)."""
    problems: list[str] = []
    items = None
    try:
        items = catalog.count()
    except sqlite3.Error as exc:
        problems.append(f"the index cannot be read: {exc}")
    damage = store.reported_damage()
    if damage:
        problems.append(f"the index is damaged ({damage}); it is being rebuilt")
    refreshed = store.refreshed()
    writable = True
    for directory in dict.fromkeys((state_dir, str(store.path.parent))):
        if (why := write_problem(directory)) is not None:
            problems.append(why)
            writable = False
    for why in (counts.problem, keys.problem):
        if why:
            problems.append(why)
    included = inclusion.read(state_dir)
    body = {
        "status": "failing" if problems else "ok",
        "problems": problems,
        "index": {
            "items": items,
            "complete": store.is_complete(),
            "damaged": damage,
            "refreshed": iso(refreshed),
            "age_seconds": round(time.time() - refreshed, 1) if refreshed else None,
            "indexer": indexer_state(store),
        },
        "state_dir": {"path": str(Path(state_dir)), "writable": writable},
        "inclusion": {**asdict(included), "time": iso(included.time)} if included else None,
    }
    return (503 if problems else 200), body
