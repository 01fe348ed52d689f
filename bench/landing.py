"""Landing pages and sitemaps at a million items (issue 32): the time of a landing page, its
BibTeX and its linkset against floors measured in the same run, and the peak memory of the
sitemaps.

    python3 bench/landing.py --items 1000000 --real 2000 [--rounds 5]

`--real` items are written to disk (testing.make_collection) and indexed by create_app; the
index is then grown to `--items` rows by SQL (each new row a real row's record under a new
repository name, its key and claim in `keys`, counted in `kinds`): the look-ups a page makes
run against a million-row index, while the items measured are real ones with their files.
12 GB and 6 million inodes for a million items on disk are not needed for that.

Each request is a WSGI call of the app (no HTTP, no test client), alternating floor and
subject (ABBA), each item once a round in a shuffled order. Floors: a constant Flask route
added to the same app, and the existing file-list page of the same items."""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import sqlite3
import statistics
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from werkzeug.test import EnvironBuilder  # noqa: E402

from archive_service.protocol.catalog import claim, sortkey  # noqa: E402
from archive_service.testing import make_collection, rep_name  # noqa: E402
from archive_service.web import create_app  # noqa: E402

SERVICE = "J8LNKB5R7W/3FUQHC5"


def grow(index: Path, items: int, real: int) -> None:
    """Add rows to the index until it holds `items`, each a copy of a real row renamed."""
    db = sqlite3.connect(index)
    rows = db.execute(
        "SELECT fingerprint, record, langs FROM items WHERE record IS NOT NULL"
    ).fetchall()
    have = db.execute("SELECT count(*) FROM items").fetchone()[0]
    added: dict[tuple[str, str], int] = {}
    batch_items, batch_keys = [], []
    for i in range(real, real + items - have):
        fingerprint, text, langs = rows[i % len(rows)]
        record = json.loads(text)
        name = rep_name(i)
        record.update(name=name, rep=name)
        record.pop("ibip", None)
        key = sortkey(name)
        batch_items.append((key, fingerprint, json.dumps(record), None, name.lower(), "", langs))
        batch_keys.append((name.lower(), claim(key)))
        kind = (record["state"], record["contenttype"])
        added[kind] = added.get(kind, 0) + 1
        if len(batch_items) == 20000:
            flush(db, batch_items, batch_keys)
    flush(db, batch_items, batch_keys)
    for (state, contenttype), n in added.items():
        db.execute(
            "INSERT INTO kinds VALUES (?, ?, ?) ON CONFLICT (state, contenttype) "
            "DO UPDATE SET n = n + excluded.n",
            (state, contenttype, n),
        )
    db.execute("UPDATE meta SET value = CAST(value AS INTEGER) + 1 WHERE key = 'generation'")
    db.commit()
    db.close()


def flush(db, batch_items: list, batch_keys: list) -> None:
    db.executemany("INSERT OR IGNORE INTO items VALUES (?, ?, ?, ?, ?, ?, ?)", batch_items)
    db.executemany("INSERT OR IGNORE INTO keys VALUES (?, ?)", batch_keys)
    batch_items.clear()
    batch_keys.clear()


def call(app, path: str, accept: str = "text/html") -> tuple[int, int]:
    environ = EnvironBuilder(path=path, headers={"Accept": accept}).get_environ()
    status = []
    body = b"".join(app(environ, lambda s, h, e=None: status.append(s)))
    return int(status[0].split()[0]), len(body)


def timed(app, paths: list[str], accept: str) -> float:
    start = time.perf_counter()
    for path in paths:
        status, _ = call(app, path, accept)
        assert status in (200, 410), (path, status)
    return (time.perf_counter() - start) / len(paths)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=1_000_000)
    parser.add_argument("--real", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-landing-"))
    made = make_collection(work / "c", args.real)
    settings = {
        "collection": str(work / "c"),
        "archiveaddress": "archive.example.org",
        "archiveserviceibi": SERVICE,
        "resolver": "http://urlib.net/" + SERVICE,
        "state_dir": str(work / "state"),
    }
    began = time.perf_counter()
    store = create_app(settings).extensions["archive_index"].store
    print(f"indexed {args.real} real items in {time.perf_counter() - began:.1f} s", flush=True)
    began = time.perf_counter()
    grow(store.path, args.items, args.real)
    print(f"grew the index to {args.items} rows in {time.perf_counter() - began:.1f} s")
    app = create_app(settings, refresh=False)
    app.add_url_rule("/floor", "floor", lambda: "constant")
    catalog = app.extensions["archive_index"].catalog
    names = []
    for generated in made:
        item = catalog.lookup(generated.rep)
        if item is not None and item.state != "Deleted" and item.filelist_public:
            names.append((item.name.text, item.directory))
    rng = random.Random(0)
    figures: dict[str, list[float]] = {}
    kinds = {
        "constant route (floor)": (lambda n, d: "/floor", "text/html"),
        "file list (floor)": (lambda n, d: f"/{SERVICE}/filelist/{d}", "text/html"),
        "landing page": (lambda n, d: f"/{SERVICE}/item/{n}", "text/html"),
        "landing page, BibTeX": (lambda n, d: f"/{SERVICE}/item/{n}", "application/x-bibtex"),
        "linkset (JSON)": (lambda n, d: f"/{SERVICE}/linkset.json/{n}", "application/json"),
    }
    for round_number in range(args.rounds):
        rng.shuffle(names)
        order = list(kinds.items())
        if round_number % 2:
            order.reverse()
        for label, (path_of, accept) in order:
            paths = [path_of(n, d) for n, d in names]
            figures.setdefault(label, []).append(timed(app, paths, accept))
    floor = statistics.median(figures["constant route (floor)"])
    filelist = statistics.median(figures["file list (floor)"])
    print(
        f"\n{args.items:,} index rows, {len(names)} items a round, {args.rounds} rounds, "
        f"load average {os.getloadavg()[0]:.2f}"
    )
    print("| request | median per request | × constant route | × file list |")
    print("| --- | --- | --- | --- |")
    for label, values in figures.items():
        value = statistics.median(values)
        print(f"| {label} | {value * 1e6:.0f} µs | {value / floor:.1f} | {value / filelist:.2f} |")
    sitemap_memory(app, args.items)


def streamed_peak(app, path: str) -> int:
    """Read the response chunk by chunk, as a server sends it: the size read."""
    environ = EnvironBuilder(path=path).get_environ()
    chunks = app(environ, lambda s, h, e=None: None)
    size = sum(len(chunk) for chunk in chunks)
    getattr(chunks, "close", lambda: None)()
    return size


def sitemap_memory(app, items: int) -> None:
    """Peak Python memory while a sitemap is made and read, first and last of the index."""
    status, size = call(app, f"/{SERVICE}/sitemap.xml", "application/xml")
    count = -(-items // 50_000)
    print(f"\nsitemap index: {count} sitemaps ({size} bytes)")
    for number in (0, count - 1):
        path = f"/{SERVICE}/sitemap/{number}.xml"
        began = time.perf_counter()
        streamed = streamed_peak(app, path)
        took = time.perf_counter() - began
        tracemalloc.start()
        streamed_peak(app, path)
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        print(
            f"sitemap {number}: {streamed / 1e6:.1f} MB of XML in {took:.1f} s; "
            f"peak traced memory while streaming it: {peak / 1e6:.2f} MB"
        )
    print(
        f"max RSS of the process: {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e3:.0f} MB"
    )


if __name__ == "__main__":
    main()
