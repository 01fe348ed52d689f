#!/usr/bin/env python3
"""The indexer's repair after an inotify queue overflow (issue 35), against a floor of the same run.

    python bench/overflow.py --items 200000 [--cache DIR] [--rounds 3] [--before]

On a copy of the generated tree made of hard links (`cp -al`, in `<cache>/runs-overflow/`),
with its index built (untimed). Each round, ABBA, each side in a fresh process and on a tree
the page cache holds (one untimed walk first):

- floor: a bare `os.scandir` walk of every directory of the tree (bench/watcher.py
  `directories`);
- repair: what the indexer does after an overflow (archive_service/indexer/repair.py):
  `index.changed.changed_since` from a moment just before a few changes (a new item in an
  existing year, a year directory renamed, a file of an item's doc/ replaced by a rename:
  nothing of the cached tree is written) and the partial refresh of what it found; the
  process runs a second thread, as the indexer does, so the reading processes are new Pythons
  (their start is timed).
- with `--before`, once: the full rescan an overflow cost before (`Writer.refresh()`).

The change made during an overflow shows when the repair ends (bench/watcher.py --changes
measures that end to end, as root).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

import gen  # noqa: E402
from run import child_env, log  # noqa: E402
from watcher import directories, ensure_index  # noqa: E402


def floor(root: str) -> dict:
    started = time.perf_counter()
    dirs = directories(root)
    return {"seconds": time.perf_counter() - started, "dirs": len(dirs)}


def change(root: Path, manifest: dict, round_: int) -> str:
    """A few changes, nothing of the cached tree written; the new item's directory."""
    editable = [e["directory"] for e in manifest["editable"] if e["directory"].count("/") == 3]
    item = editable[round_ % len(editable)]
    year = item.rsplit("/", 1)[0]
    minute = 0
    while (root / year / f"12.31.23.{minute:02d}").exists():  # made by an earlier run
        minute += 1
    new = f"{year}/12.31.23.{minute:02d}"
    (root / new / "doc").mkdir(parents=True)
    (root / new / "doc" / "a.pdf").write_bytes(b"%PDF-1.4\n")
    other = editable[(round_ + 7) % len(editable)].rsplit("/", 1)[0]
    host, word, old = other.split("/")
    moved = root / host / word
    free = 2100
    while (moved / str(free)).exists():
        free += 1
    if (moved / old).is_dir():
        os.rename(moved / old, moved / str(free))
    doc = root / editable[(round_ + 3) % len(editable)] / "doc"
    files = sorted(p for p in doc.iterdir() if p.is_file())
    if files:
        (doc / ".new").write_bytes(b"replaced\n" * (round_ + 2))
        os.replace(doc / ".new", files[0])
    return new


def subject(root: str, state: str, since: int, new: str, before: bool) -> dict:
    from archive_service.index import changed, store
    from archive_service.index.walk import sortkey

    threading.Thread(target=time.sleep, args=(600,), daemon=True).start()  # as the indexer
    st = store.Store(root, state)
    started = time.perf_counter()
    if before:
        result = store.Writer(st).refresh()
        places = None
    else:
        places = changed.changed_since(st, since)
        looked = time.perf_counter() - started
        result = store.Writer(st).refresh(places)
    seconds = time.perf_counter() - started
    conn = st.connect(readonly=True)
    try:
        shown = conn.execute("SELECT 1 FROM items WHERE sortkey = ?", (sortkey(new),)).fetchone()
    finally:
        conn.close()
    out = {"seconds": seconds, "read": result.read, "removed": result.removed, "shown": bool(shown)}
    if places is not None:
        out.update(places=len(places), looked=looked)
    return out


def in_process(*args: str) -> dict:
    out = subprocess.run(
        [sys.executable, __file__, *args], capture_output=True, check=True, env=child_env()
    )
    return json.loads(out.stdout)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["floor"]:
        print(json.dumps(floor(argv[1])))
        return 0
    if argv[:1] == ["subject"]:
        root, state, since, new, before = argv[1:]
        print(json.dumps(subject(root, state, int(since), new, before == "1")))
        return 0
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--items", type=int, required=True)
    parser.add_argument("--cache", type=Path, default=None)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--before", action="store_true", help="time the full rescan once too")
    parser.add_argument("--out", type=Path, default=None, help="append the JSON here")
    args = parser.parse_args(argv)
    cache = args.cache or gen.default_cache()
    source, manifest = gen.ensure(args.items, cache, log=log)
    work = cache / "runs-overflow"
    work.mkdir(parents=True, exist_ok=True)
    root = work / f"copy-{args.items}"
    if not root.exists():
        log(f"copying {source} as hard links into {root}")
        subprocess.run(["cp", "-al", str(source), str(root)], check=True)
    state = work / f"state-{args.items}"
    ensure_index(root, state)
    in_process("floor", str(root))  # untimed: the tree into the page cache
    rounds = []
    for r in range(args.rounds):
        figures = {"load": os.getloadavg()}
        for which in ("floor", "repair") if r % 2 == 0 else ("repair", "floor"):
            if which == "floor":
                figures["floor"] = in_process("floor", str(root))
            else:
                since = time.time_ns()
                new = change(root, manifest, r)
                figures["repair"] = in_process(
                    "subject", str(root), str(state), str(since), new, "0"
                )
        figures["ratio"] = figures["repair"]["seconds"] / figures["floor"]["seconds"]
        log(f"  round {r}: {figures}")
        rounds.append(figures)
    result = {"when": time.strftime("%Y-%m-%d %H:%M:%S"), "items": args.items, "rounds": rounds}
    if args.before:
        new = change(root, manifest, args.rounds)
        result["before"] = in_process("subject", str(root), str(state), "0", new, "1")
        result["before"]["floor"] = in_process("floor", str(root))
        log(f"  before: {result['before']}")
    text = json.dumps(result, indent=1)
    print(text)
    if args.out:
        with open(args.out, "a") as f:
            f.write(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
