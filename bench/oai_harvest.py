"""The OAI-PMH data provider at scale (issue 33): a page's time at 10,000 and at 1,000,000
items (the target: every page ≤ 200 ms, flat between the two), and a full harvest of the
biggest size (time, bytes, the process's memory along it) against a floor in the same run.

    python bench/oai_harvest.py [--items 10000,1000000] [--pages 200] [--full]

Each size's index is made by indexing a small real collection (schema, meta, the service's
own rows) and then writing `items`, `keys` and the OAI rows of the other items straight into
it, as the writer would (a million item directories on disk cost gigabytes and an hour; how
they got into the index is the writer's cost, measured in bench/run.py). The app is
`create_app(refresh=False)`: it answers from the index as it stands, as CGI does.

Figures:
- page times (ms, median and max) of ListRecords and ListIdentifiers pages reached by
  resumption tokens, from the start of the list, from its middle (`from`), and of a
  set-selective list (`repository:<subdomain>`), for each size;
- the full harvest (`--full`, the biggest size): every ListRecords page in turn, total
  seconds, bytes, records/s, and the RSS of the process every 1,000 pages;
- the floor: the same rows read by one keyset scan of the index (SQL and JSON decoding, no
  XML, no HTTP): what any provider over this index must pay.
"""

from __future__ import annotations

import argparse
import json
import re
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from archive_service import testing  # noqa: E402
from archive_service.index import oai as oairows  # noqa: E402
from archive_service.index.records import claim  # noqa: E402
from archive_service.index.store import Store, Writer  # noqa: E402
from archive_service.index.walk import sortkey  # noqa: E402
from archive_service.web import create_app  # noqa: E402

SERVICE = "sid.inpe.br/mtc-m18@80/2008/03.17.15.17"
TOKEN = re.compile(rb"<resumptionToken[^>]*>([^<]+)</resumptionToken>")
BATCH = 20_000


def rss_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def fill(conn: sqlite3.Connection, items: int) -> None:
    """`items` synthetic items (every tenth a Metadata item, each with inline dc), written
    into the index as the writer writes them; datestamps spread over ten years at any size."""
    start, step = 1_400_000_000, 315_000_000 // items
    conn.execute("BEGIN")
    rows, keys, oai = [], [], []
    for i in range(items):
        rep = testing.rep_name(1000 + i)  # after the real collection's
        key = sortkey(rep)
        record = {
            "name": rep,
            "rep": rep,
            "state": "Original",
            "contenttype": "Metadata" if i % 10 == 0 else "Data",
            "timestamp": "2012-03-05T08:15:00+00:00",
            "dc": {"title": [f"Generated item number {i}"], "creator": [f"Author {i % 97}"]},
        }
        text = json.dumps(record, separators=(",", ":"))
        rows.append((key, "f", text, rep.lower()))
        keys.append((rep.lower(), claim(key)))
        parts = rep.split("/")
        oai.append(
            (
                rep.lower(),
                rep,
                key,
                start + i * step,
                0,
                "d",
                record["contenttype"],
                parts[0],
                "/".join(parts[:2]),
            )
        )
        if len(rows) >= BATCH or i == items - 1:
            conn.executemany(
                "INSERT OR REPLACE INTO items (sortkey, fingerprint, record, keys) "
                "VALUES (?, ?, ?, ?)",
                rows,
            )
            conn.executemany("INSERT OR IGNORE INTO keys VALUES (?, ?)", keys)
            conn.executemany(
                f"INSERT OR REPLACE INTO {oairows.TABLE} VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", oai
            )
            rows, keys, oai = [], [], []
    conn.execute(f"DELETE FROM {oairows.TABLE}_counts")
    conn.execute(f"INSERT INTO {oairows.TABLE}_counts SELECT '', '', count(*) FROM {oairows.TABLE}")
    for column in oairows.SET_COLUMNS:
        conn.execute(
            f"INSERT INTO {oairows.TABLE}_counts SELECT '{column}', {column}, count(*) "
            f"FROM {oairows.TABLE} WHERE {column} IS NOT NULL GROUP BY {column}"
        )
    conn.execute("UPDATE meta SET value = CAST(value AS INTEGER) + 1 WHERE key = 'generation'")
    conn.execute("COMMIT")


def build(base: Path, items: int) -> dict:
    collection, state = base / f"c{items}", base / f"s{items}"
    testing.make_collection(collection, 20)
    (collection / SERVICE / "doc").mkdir(parents=True)
    (collection / SERVICE / "doc" / "about.txt").write_text("the service\n")
    store = Store(collection, state)
    Writer(store).refresh()
    conn = store.connect()
    started = time.monotonic()
    fill(conn, items)
    conn.close()
    print(f"  {items:,} items written into the index in {time.monotonic() - started:.0f} s")
    return {
        "collection": str(collection),
        "state_dir": str(state),
        "archiveaddress": "archive.example",
        "archiveserviceibi": SERVICE,
        "resolver": "http://urlib.net",
    }


def get(client, query: str) -> tuple[float, bytes]:
    t = time.perf_counter()
    body = client.get(f"/{SERVICE}/oai?{query}").data
    return time.perf_counter() - t, body


def token_of(body: bytes) -> str | None:
    found = TOKEN.search(body)
    return found.group(1).decode() if found else None


def sample_pages(client, verb: str, extra: str, pages: int) -> list[float]:
    """Times of the first `pages` pages of a list, each after the first reached by its
    resumption token (`from` in the middle of the ten years starts mid-list)."""
    times = []
    elapsed, body = get(client, f"verb={verb}&metadataPrefix=oai_dc{extra}")
    times.append(elapsed)
    token = token_of(body)
    while token and len(times) < pages:
        elapsed, body = get(client, f"verb={verb}&resumptionToken={token}")
        times.append(elapsed)
        token = token_of(body)
    return times


def full_harvest(client, items: int) -> dict:
    started = time.perf_counter()
    total_bytes, records, pages = 0, 0, 0
    memory = [rss_mb()]
    query = "verb=ListRecords&metadataPrefix=oai_dc"
    slowest = 0.0
    while True:
        elapsed, body = get(client, query)
        slowest = max(slowest, elapsed)
        total_bytes += len(body)
        records += body.count(b"<record>")
        pages += 1
        if pages % 1000 == 0:
            memory.append(rss_mb())
            print(f"    {records:,} records, {time.perf_counter() - started:.0f} s", flush=True)
        token = token_of(body)
        if not token:
            break
        query = f"verb=ListRecords&resumptionToken={token}"
    memory.append(rss_mb())
    seconds = time.perf_counter() - started
    return {
        "records": records,
        "pages": pages,
        "seconds": seconds,
        "bytes": total_bytes,
        "slowest_ms": slowest * 1000,
        "rss_mb": memory,
    }


def floor(settings: dict) -> float:
    """One keyset scan of the OAI rows with their items' records decoded: no XML, no HTTP."""
    store = Store(settings["collection"], settings["state_dir"])
    conn = store.connect(readonly=True)
    started = time.perf_counter()
    after, n = (-1, ""), 0
    while True:
        rows = conn.execute(
            f"SELECT o.stamp, o.key, i.record FROM {oairows.TABLE} o JOIN items i "
            "ON i.sortkey = o.sortkey WHERE (o.stamp, o.key) > (?, ?) "
            "ORDER BY o.stamp, o.key LIMIT 100",
            after,
        ).fetchall()
        if not rows:
            break
        for row in rows:
            json.loads(row[2])
        n += len(rows)
        after = rows[-1][:2]
    conn.close()
    return time.perf_counter() - started


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--items", default="10000,1000000")
    parser.add_argument("--pages", type=int, default=200)
    parser.add_argument("--full", action="store_true", help="harvest all of the biggest size")
    args = parser.parse_args()
    sizes = [int(s) for s in args.items.split(",")]
    results = {}
    with tempfile.TemporaryDirectory(prefix="oai-bench-") as tmp:
        for items in sizes:
            print(f"{items:,} items:")
            settings = build(Path(tmp), items)
            client = create_app(settings, refresh=False).test_client()
            figures = {}
            for name, verb, extra in (
                ("ListRecords", "ListRecords", ""),
                ("ListIdentifiers", "ListIdentifiers", ""),
                ("ListRecords set", "ListRecords", "&set=repository:sid.inpe.br"),
                ("ListRecords from", "ListRecords", "&from=2019-01-01"),
                ("ListRecords ct", "ListRecords", "&set=contenttype:Data"),
                # completeListSize of a dated list: every row's range, and one day's
                ("ListRecords 1970", "ListRecords", "&from=1970-01-01"),
                ("ListRecords 1 day", "ListRecords", "&from=2019-01-01&until=2019-01-01"),
            ):
                times = sample_pages(client, verb, extra, args.pages)
                figures[name] = (statistics.median(times) * 1000, max(times) * 1000, len(times))
                print(
                    f"  {name:17} first {times[0] * 1000:6.1f} ms (sizes the list), median "
                    f"{figures[name][0]:6.1f} ms, max {figures[name][1]:6.1f} ms over "
                    f"{len(times)} pages"
                )
            results[items] = figures
            if args.full and items == sizes[-1]:
                base = floor(settings)
                print(f"  floor: one keyset scan with records decoded: {base:.1f} s")
                done = full_harvest(client, items)
                print(
                    f"  full harvest: {done['records']:,} records in {done['pages']:,} pages, "
                    f"{done['seconds']:.0f} s ({done['records'] / done['seconds']:,.0f} "
                    f"records/s, {done['seconds'] / base:.1f}x the floor), "
                    f"{done['bytes'] / 1e6:,.0f} MB, slowest page {done['slowest_ms']:.0f} ms, "
                    f"RSS {done['rss_mb'][0]:.0f} -> {max(done['rss_mb']):.0f} MB"
                )
    if len(sizes) > 1:
        low, high = results[sizes[0]], results[sizes[-1]]
        for name in low:
            print(
                f"{name}: median page {high[name][0] / low[name][0]:.2f}x from "
                f"{sizes[0]:,} to {sizes[-1]:,} items"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
