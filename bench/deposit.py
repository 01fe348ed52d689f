"""How long `deposit` takes as the collection grows (issue 17): it must not grow with it.

    python bench/deposit.py --items 10000,100000 [--before REF] [--rounds 5]
    python bench/deposit.py --items 10000,1000000 --cache /work/bench-cache   # not in CI

For each size, in a fresh process per variant: the deposit function of this checkout (after
an untimed first deposit, which builds the index as the first use does) and, with --before,
that of git REF (which read the whole collection on every call). Each round deposits one
small file as the next edition of the previous round's item (the index must find it), then
the new items are removed, so the cached collection of bench/gen.py is left as it was.
Figures: the median seconds of a round, and its ratio to the smallest size's (flat: ≈ 1),
the processes of this checkout run in ABBA order over the sizes; the item.yaml files one
deposit opens (an audit hook: the count does not depend on the machine's load); and the wall
time of one `archive-service deposit` command (process start included).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))

import gen  # noqa: E402

ADDRESS = "bench.example.org:80"
IP = "150.163.2.174"

# Run in a fresh process with the checkout under test first on sys.path.
ROUNDS = r"""
import json, os, shutil, sys, time
from decimal import Decimal
try:
    from archive_service import deposit
except ImportError:  # --before a checkout where deposit was collection/deposit.py
    from archive_service.collection import deposit
collection, state, upload, rounds = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
config = {"collection": collection, "state_dir": state, "archiveaddress": %r,
          "archiveip": %r}
opened = []
sys.addaudithook(lambda event, args: opened.append(1) if event == "open"
                 and str(args[0]).endswith("/item.yaml") else None)
made, times, previous = [], [], None
try:
    for i in range(rounds + 1):
        del opened[:]
        started = time.perf_counter()
        done = deposit.deposit(config, [upload], nextedition_of=previous,
                               granularity=Decimal("0.01"))
        seconds = time.perf_counter() - started
        if previous is not None:
            assert done.linked, "the previous deposit was not found"
        made.append(str(done.directory))
        previous = done.primary
        if i:  # the first one builds the index (after), or is like the others (before)
            times.append(seconds)
finally:
    for directory in made:
        shutil.rmtree(directory, ignore_errors=True)
print(json.dumps({"seconds": times, "sidecars_opened": len(opened)}))
""" % (ADDRESS, IP)  # noqa: UP031 -- a code template full of braces: %r reads better than {{}}


def checkout(ref: str, into: Path) -> Path:
    """The archive_service package of git `ref`, extracted under `into`."""
    into.mkdir(parents=True, exist_ok=True)
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", ref, "archive_service"], check=True, capture_output=True
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return into


def rounds(code_path: Path, collection: Path, state: Path, upload: Path, n: int) -> dict:
    env = {**os.environ, "PYTHONPATH": str(code_path)}
    out = subprocess.run(
        [sys.executable, "-c", ROUNDS, str(collection), str(state), str(upload), str(n)],
        env=env,
        check=True,
        capture_output=True,
        text=True,
        cwd=code_path,
    )  # `-c` puts the working directory first
    return json.loads(out.stdout.strip().splitlines()[-1])


def command_seconds(collection: Path, state: Path, upload: Path) -> float:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    started = time.perf_counter()
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "archive_service.cli",
            "deposit",
            "--collection",
            str(collection),
            "--state-dir",
            str(state),
            "--archiveaddress",
            ADDRESS,
            "--archiveip",
            IP,
            str(upload),
        ],
        env=env,
        check=True,
        capture_output=True,
        text=True,
    )
    seconds = time.perf_counter() - started
    directory = out.stdout.split()[1]
    shutil.rmtree(directory)
    return seconds


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", default="10000,100000")
    parser.add_argument("--before", metavar="REF", help="also measure git REF's deposit")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--before-rounds", type=int, default=3)
    parser.add_argument("--cache", type=Path, default=None)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="bench-deposit-") as tmp:
        tmp = Path(tmp)
        upload = tmp / "report.txt"
        upload.write_text("a report\n")
        before = checkout(args.before, tmp / "before") if args.before else None
        sizes = [int(n) for n in args.items.split(",")]
        collections = {n: gen.ensure(n, args.cache)[0] for n in sizes}
        results = [{"items": n, "after": [], "command": []} for n in sizes]
        # ABBA over the sizes (the first process of each builds its index, untimed), so a
        # machine whose load drifts weighs on every size alike.
        for order in (sizes, sizes[::-1], sizes[::-1], sizes):
            for row in (results[sizes.index(n)] for n in order):
                n = row["items"]
                got = rounds(ROOT, collections[n], tmp / f"state-{n}", upload, args.rounds)
                row["after"] += got["seconds"]
                row["sidecars_opened"] = got["sidecars_opened"]
                row["command"].append(command_seconds(collections[n], tmp / f"state-{n}", upload))
        for row in results:
            if before is not None:
                got = rounds(
                    before,
                    collections[row["items"]],
                    tmp / "state-before",
                    upload,
                    args.before_rounds,
                )
                row["before"], row["before_sidecars_opened"] = (
                    got["seconds"],
                    got["sidecars_opened"],
                )
            print(json.dumps(row), flush=True)
    base = {k: statistics.median(results[0][k]) for k in ("after", "before") if k in results[0]}
    print(
        "| items | after: one deposit (median) | ÷ smallest | sidecars opened | `deposit` "
        "command (median) | before | ÷ smallest | sidecars opened |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for row in results:
        after = statistics.median(row["after"])
        line = (
            f"| {row['items']:,} | {after * 1000:.1f} ms | {after / base['after']:.2f} | "
            f"{row['sidecars_opened']} | {statistics.median(row['command']):.2f} s |"
        )
        if "before" in row:
            old = statistics.median(row["before"])
            line += (
                f" {old:.1f} s | {old / base['before']:.2f} | {row['before_sidecars_opened']:,} |"
            )
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
