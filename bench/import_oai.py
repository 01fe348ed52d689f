"""The rate of `import oai-pmh` against the harvest alone, in one run (issue 21).

    python bench/import_oai.py [--records 10000] [--page-size 100] [--rounds 3]

The tests' OAI-PMH provider (tests/oai_provider.py) serves `--records` oai_dc records on a
loopback port, in pages of `--page-size`. Figures, each the median of `--rounds`:
- the harvest-only floor: records/s of `Harvest` (HTTP, strict parse, Records), no apply;
- the first import: records/s of harvest + `apply` into an empty collection (every record
  minted, its item.yaml written, the index brought up to date);
- the re-run: records/s of the whole list again (`from` 1970), nothing minted.
Each import round starts from a fresh collection and state directory.
"""

from __future__ import annotations

import argparse
import json
import logging
import statistics
import sys
import tempfile
import time
from decimal import Decimal
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from archive_service.imports import apply as applymod  # noqa: E402
from archive_service.imports import oaipmh  # noqa: E402
from oai_provider import Provider, fixture_record, started_provider  # noqa: E402

GRANULARITY = Decimal("0.001")  # what the minting allows, not the clock, sets the pace


def harvest(url: str, from_date: str | None = None) -> tuple[float, list]:
    started = time.perf_counter()
    records = list(oaipmh.Harvest(url, from_date=from_date))
    return time.perf_counter() - started, records


def one_import(url: str, base: Path) -> dict:
    collection, state = base / "collection", base / "state"
    collection.mkdir(parents=True)
    config = {
        "collection": str(collection),
        "state_dir": str(state),
        "archiveaddress": "bench.example.org",
        "archiveip": "192.0.2.10",
    }
    started = time.perf_counter()
    _, records = harvest(url)
    first = applymod.apply(
        config, oaipmh.source_name(url), records, complete=False, granularity=GRANULARITY
    )
    first_seconds = time.perf_counter() - started
    started = time.perf_counter()
    _, records = harvest(url, "1970-01-01")
    again = applymod.apply(
        config, oaipmh.source_name(url), records, complete=False, granularity=GRANULARITY
    )
    again_seconds = time.perf_counter() - started
    assert first.minted == len(records) and again.minted == 0, (first.line(), again.line())
    return {"first": first_seconds, "again": again_seconds}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--records", type=int, default=10_000)
    parser.add_argument("--page-size", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json", type=Path, help="write the figures here too")
    args = parser.parse_args()
    logging.getLogger("werkzeug").setLevel(logging.WARNING)  # a line per request otherwise
    provider = Provider(
        (fixture_record(n) for n in range(1, args.records + 1)), page_size=args.page_size
    )
    floors, firsts, agains = [], [], []
    with started_provider(provider), tempfile.TemporaryDirectory() as tmp:
        harvest(provider.url)  # warm: imports, first connections
        for round_ in range(args.rounds):
            seconds, records = harvest(provider.url)
            assert len(records) == args.records
            floors.append(args.records / seconds)
            done = one_import(provider.url, Path(tmp) / f"round-{round_}")
            firsts.append(args.records / done["first"])
            agains.append(args.records / done["again"])
    figures = {
        "records": args.records,
        "page_size": args.page_size,
        "harvest_only_records_per_s": round(statistics.median(floors)),
        "first_import_records_per_s": round(statistics.median(firsts)),
        "rerun_records_per_s": round(statistics.median(agains)),
    }
    figures["first_import_share_of_floor"] = round(
        figures["first_import_records_per_s"] / figures["harvest_only_records_per_s"], 3
    )
    print(json.dumps(figures, indent=1))
    if args.json:
        args.json.write_text(json.dumps(figures, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
