"""The item list's search at 1,000,000 items (issue 34: a title search ≤ 50 ms).

    python bench/search.py [--items 1000000] [--rounds 5]

Builds an index of `--items` items straight through the writer (`Writer._write` in `_Batch`
transactions, as a refresh writes what it read: no collection on disk, the rows made here),
twice: with the search table kept (this checkout) and with `index/search.py`'s writer hooks
made no-ops (the index as it was before issue 34), and reports each build's time and size.

Then, on the searched index, the median of `--rounds` of one page of the item list
(`StoreCatalog.page`, a fresh catalog each round: no cached rows) for a rare title word, a
common one (in about a fifth of the titles; the first page and one from the middle), an
accented query folded, and parts of IBIs (`03.17`, `mtc-m18`, a whole repository name), each
as a ratio to the floor: a page with no search (keyset on the primary key). `before` gives the
same searches through the substring scan this replaced (at most 20,000 rows per page, case and
accents not folded, a rare word on one page in 50 only) for comparison.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from archive_service.index import search  # noqa: E402
from archive_service.index.catalog import StoreCatalog  # noqa: E402
from archive_service.index.records import _Row  # noqa: E402
from archive_service.index.store import Store, Writer, _Batch  # noqa: E402
from archive_service.index.walk import sortkey  # noqa: E402
from archive_service.testing import ibip_name, rep_name  # noqa: E402

WORDS = (
    "relatório técnico anual análise dados satélite clima região floresta modelo "
    "sensoriamento remoto imagens ocean atmosfera previsão tempo energia solar física"
).split()
RARE = "Ecolocalização em morcegos tropicais"
# The search this replaced (index/catalog.py before issue 34), over a window of 20,000 rows.
OLD = (
    "SELECT sortkey, record FROM (SELECT sortkey, keys, record FROM items WHERE record IS NOT "
    "NULL AND sortkey > ? ORDER BY sortkey LIMIT 20000) WHERE (instr(keys, ?) OR "
    "instr(json_extract(record, '$.timestamp'), ?) = 1 OR EXISTS (SELECT 1 FROM "
    "json_each(record, '$.dc.title') WHERE instr(lower(value), ?)) OR EXISTS (SELECT 1 FROM "
    "json_each(record, '$.dc.date') WHERE instr(value, ?) = 1)) LIMIT 51"
)


def rows(count: int):
    rng = random.Random(34)
    for i in range(count):
        rep = rep_name(i)
        ibip = ibip_name(i) if i % 3 == 0 else None
        title = RARE if i == count * 2 // 3 else " ".join(rng.sample(WORDS, 4)).capitalize()
        record = {
            "name": rep,
            "rep": rep,
            "ibip": ibip,
            "state": "Original",
            "contenttype": "Data",
            "timestamp": f"20{i % 24:02d}-0{1 + i % 9}-1{i % 9}T10:00:00+00:00",
            "dc": {"title": [title], "date": [str(1990 + i % 30)]},
        }
        keys = [k.lower() for k in (rep, ibip) if k]
        yield _Row(
            sortkey(rep),
            f"fp{i}",
            json.dumps({k: v for k, v in record.items() if v}, separators=(",", ":")),
            None,
            keys,
            [],
            ["-"],
            [],
            ("Original", "Data"),
        )


def build(state: Path, count: int, searched: bool) -> tuple[Store, float, int]:
    kept = search.note_written
    if not searched:
        search.note_written = lambda conn, key, record: None
    try:
        store = Store(state / "collection", state)
        writer = Writer(store)
        started = time.perf_counter()
        conn = store.connect()
        writer._prepare(conn)
        batch = _Batch(conn, store)
        for row in rows(count):
            writer._write(batch, row, new=True)
        batch.commit()
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        conn.close()
        seconds = time.perf_counter() - started
    finally:
        search.note_written = kept
    return store, seconds, os.path.getsize(store.path)


def timed_page(store: Store, rounds: int, **query) -> tuple[float, int]:
    times, shown = [], 0
    for _ in range(rounds):
        catalog = StoreCatalog(store)
        catalog.page(after="~")  # the connection opened, nothing read
        started = time.perf_counter()
        shown = len(catalog.page(**query).items)
        times.append(time.perf_counter() - started)
        catalog.close()
    return statistics.median(times) * 1000, shown


def timed_old(store: Store, rounds: int, needle: str, after: str) -> tuple[float, int]:
    conn = store.connect(readonly=True)
    times, shown = [], 0
    for _ in range(rounds):
        started = time.perf_counter()
        shown = len(conn.execute(OLD, (sortkey(after), *[needle.lower()] * 4)).fetchall())
        times.append(time.perf_counter() - started)
    conn.close()
    return statistics.median(times) * 1000, shown


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--items", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--dir", help="where to build (default: /dev/shm when there is one)")
    args = parser.parse_args()
    where = args.dir or ("/dev/shm" if os.path.isdir("/dev/shm") else None)
    with tempfile.TemporaryDirectory(prefix="bench-search-", dir=where) as tmp:
        before = build(Path(tmp) / "before", args.items, searched=False)
        after = build(Path(tmp) / "after", args.items, searched=True)
        print(f"items {args.items}  load {open('/proc/loadavg').read().split()[0]}")
        for name, (_, seconds, size) in (("before", before), ("after", after)):
            print(f"build {name:7} {seconds:7.1f} s  {size / 1e6:8.1f} MB")
        store = after[0]
        middle = rep_name(args.items // 2)
        floor, _ = timed_page(store, args.rounds, after=middle)
        print(f"{'floor: a page, no search':40} {floor:8.2f} ms")
        cases = [
            ("rare title word", "morcegos", ""),
            ("rare title word, folded", "ECOLOCALIZACAO", ""),
            ("common title word", "relatorio", ""),
            ("common title word, from the middle", "relatorio", middle),
            ("two common words", "tecnico anual", ""),
            ("IBI part 03.17", "03.17", ""),
            ("IBI part mtc-m18", "mtc-m18", middle),
            ("a whole repository name", rep_name(args.items // 3), ""),
            ("no match", "zzzzzz", ""),
            ("one letter (a prefix of many words)", "a", ""),
        ]
        for label, text, start in cases:
            ms, shown = timed_page(store, args.rounds, after=start, search=text)
            old, old_shown = timed_old(store, args.rounds, text, start)
            print(
                f"{label:40} {ms:8.2f} ms  x{ms / floor:6.1f}  ({shown:2} shown)"
                f"   before {old:8.2f} ms ({old_shown:2} shown)"
            )


if __name__ == "__main__":
    main()
