#!/usr/bin/env python3
"""What following a big collection costs the indexer (issue 22), against a floor of the same run.

    python bench/watcher.py --items 100000 --cache DIR            setting the watches, 3 rounds
    python bench/watcher.py --items 1000000 --cache DIR --rounds 1
    python bench/watcher.py --items 100000 --cache DIR --changes  and change-to-answer

Setting the watches: `archive-service serve` on the generated collection (its index built first,
untimed); from the moment it answers a urlRequest, the seconds until its indexer logs that it
watches the collection, and the indexer's RSS then and its peak after its first rescan. The
floor, alternated with it (ABBA): a fresh process that lists the same directories (untimed) and
then times a bare `inotify_add_watch` loop over them (libc through ctypes), with the kernel's
own cost per watch (the growth of Slab in /proc/meminfo across the loop).

Changes (`--changes`) run on a copy of the tree made of hard links (`cp -al`, in
`<cache>/runs-watcher/`): nothing of the cached tree is written, only new directories and
renames of the copy's own directories. Cases: items created under new host/word/year levels,
a year directory renamed (and back), a subtree moved in from outside, and an item created
right after a burst of directories that overflows the indexer's inotify queue (the indexer is
started with fs.inotify.max_queued_events lowered to 64, as root, and the value restored once
it has started: the kernel takes it when the queue is made; it is stopped by SIGSTOP while
the burst is made). Latency: from the change to the first of three answers in a row that
show it.
"""

from __future__ import annotations

import argparse
import ctypes
import ctypes.util
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

import gen  # noqa: E402
import loadgen  # noqa: E402
from run import SERVICE_IBI, Server, child_env, children, free_port, log, memory_of  # noqa: E402
from run import url_request as request_path  # noqa: E402

# The events the indexer asks for (archive_service/indexer/inotify.py MASK): the floor asks for
# the same, so the kernel does the same work.
MASK = 0x2 | 0x4 | 0x8 | 0x40 | 0x80 | 0x100 | 0x200 | 0x400 | 0x800 | 0x01000000 | 0x02000000
QUEUE = "/proc/sys/fs/inotify/max_queued_events"


def meminfo(key: str) -> int:
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    return 0


def directories(root: str) -> list[bytes]:
    found, stack = [], [os.fsencode(root)]
    while stack:
        path = stack.pop()
        found.append(path)
        try:
            with os.scandir(path) as entries:
                stack.extend(e.path for e in entries if e.is_dir(follow_symlinks=False))
        except OSError:
            pass
    return found


def floor(root: str) -> dict:
    """In a fresh process: a bare inotify_add_watch loop over the collection's directories."""
    dirs = directories(root)
    libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
    fd = libc.inotify_init1(os.O_CLOEXEC)
    add = libc.inotify_add_watch
    slab = meminfo("Slab")
    started = time.perf_counter()
    failed = sum(1 for path in dirs if add(fd, path, MASK) < 0)
    seconds = time.perf_counter() - started
    grown = meminfo("Slab") - slab
    out = {
        "dirs": len(dirs),
        "failed": failed,
        "seconds": seconds,
        "kernel_kb": grown,
        "kernel_bytes_per_watch": grown * 1024 / max(1, len(dirs) - failed),
        "rss_mb": memory_of(os.getpid()).get("VmRSS"),
    }
    os.close(fd)
    return out


def run_floor(root: Path) -> dict:
    out = subprocess.run(
        [sys.executable, __file__, "floor", str(root)], capture_output=True, check=True
    )
    return json.loads(out.stdout)


def ensure_index(root: Path, state: Path) -> None:
    if (state / "index").is_dir():
        return
    log(f"building the index of {root} into {state} (untimed)")
    subprocess.run(
        [sys.executable, "-m", "archive_service.cli", "index", "--collection", str(root)]
        + ["--state-dir", str(state)],
        stdout=subprocess.DEVNULL,
        env=child_env(),
        check=True,
    )


def serve(root: Path, state: Path, logfile: Path) -> Server:
    port = free_port()
    cmd = [sys.executable, "-m", "archive_service.cli", "serve", "--collection", str(root)]
    cmd += ["--archiveaddress", f"localhost:{port}", "--archiveserviceibi", SERVICE_IBI]
    cmd += ["--state-dir", str(state), "--bind", f"127.0.0.1:{port}", "--workers", "2"]
    cmd += ["--resolver", "none"]
    return Server("archive-service serve", cmd, port, logfile)


def indexer_of(server: Server) -> int | None:
    for worker in server.workers():
        for pid in children(worker):
            try:
                cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
            except OSError:
                continue
            if b"--watch" in cmdline:
                return pid
    return None


def wait_line(server: Server, needles: tuple[str, ...], timeout: float) -> tuple[str, float]:
    """The first log line holding one of `needles`, and when it was seen (perf_counter)."""
    deadline = time.perf_counter() + timeout
    while time.perf_counter() < deadline:
        for line in server.log_text().splitlines():
            if any(n in line for n in needles):
                return line, time.perf_counter()
        time.sleep(0.05)
    raise RuntimeError(f"no {needles} in {server.log.name} within {timeout:.0f} s")


def subject(root: Path, state: Path, work: Path, probe: str, items: int) -> dict:
    server = serve(root, state, work / "serve.log")
    try:
        answered = server.wait_ready(request_path(probe), None, 600)
        answered_at = server.started + answered
        line, seen = wait_line(server, ("watching ", "not watching "), 120 + items / 500)
        pid = indexer_of(server)
        at_watch = memory_of(pid) if pid else {}
        wait_line(server, ("consistency rescan at start",), 120 + items / 500)
        after = memory_of(pid) if pid else {}
        return {
            "answered_s": answered,
            "watches_set_s": seen - answered_at,
            "follow": line.split(": ", 1)[-1].strip(),
            "rss_mb_at_watch": at_watch.get("VmRSS"),
            "rss_mb_after_rescan": after.get("VmRSS"),
            "peak_rss_mb": after.get("VmHWM"),
        }
    finally:
        server.stop()


def setup_figures(items: int, cache: Path, work: Path, rounds: int) -> dict:
    root, manifest = gen.ensure(items, cache, log=log)
    state = work / f"state-{items}"
    ensure_index(root, state)
    probe = manifest["editable"][0]["directory"]
    floors, subjects = [], []
    for r in range(rounds):
        order = ("floor", "subject") if r % 2 == 0 else ("subject", "floor")
        for which in order:
            if which == "floor":
                floors.append(run_floor(root))
                log(f"  floor: {floors[-1]}")
            else:
                subjects.append(subject(root, state, work, probe, items))
                log(f"  subject: {subjects[-1]}")
    return {"items": items, "floor": floors, "subject": subjects}


# -------------------------------------------------------------------------- changes


def shown(server: Server, ibi: str, timeout: float, present: bool = True) -> float | None:
    """Seconds until three answers in a row say `ibi` is (or is no longer) served."""
    started = time.perf_counter()
    streak = 0
    while time.perf_counter() - started < timeout:
        status, body = loadgen.fetch(server.port, request_path(ibi))
        if (status == 200 and b"url " in body) == present:
            streak += 1
            if streak == 1:
                first = time.perf_counter() - started
            if streak >= 3:
                return first
        else:
            streak = 0
        time.sleep(0.005)
    return None


def new_item(root: Path, directory: str) -> None:
    path = root / directory / "doc"
    path.mkdir(parents=True)
    (path / "a.pdf").write_bytes(b"%PDF-1.4\n")


def change_figures(items: int, cache: Path, work: Path, count: int) -> dict:
    source, manifest = gen.ensure(items, cache, log=log)
    root = work / f"copy-{items}"
    if not root.exists():
        log(f"copying {source} as hard links into {root}")
        subprocess.run(["cp", "-al", str(source), str(root)], check=True)
    outside = work / "outside"
    shutil.rmtree(outside, ignore_errors=True)
    outside.mkdir()
    for stale in root.glob("wbench-*"):
        shutil.rmtree(stale)
    state = work / f"state-copy-{items}"
    ensure_index(root, state)
    years = sorted({"/".join(e["directory"].split("/")[:3]) for e in manifest["editable"]} - {""})
    years = [y for y in years if y.count("/") == 2][:count]
    results: dict[str, list] = {
        "new levels": [],
        "subtree renamed": [],
        "moved in": [],
        "after an overflow": [],
    }
    missed: dict[str, int] = {k: 0 for k in results}
    repairs: list[float] = []  # from the end of an overflow to the end of its rescan
    lowered = os.access(QUEUE, os.W_OK)
    previous = Path(QUEUE).read_text() if lowered else None
    if lowered:
        Path(QUEUE).write_text("64\n")
    server = serve(root, state, work / "serve-changes.log")
    try:
        server.wait_ready(request_path(manifest["editable"][0]["directory"]), None, 600)
        wait_line(server, ("watching ", "not watching "), 120 + items / 500)
        if previous is not None:
            Path(QUEUE).write_text(previous)
        wait_line(server, ("consistency rescan at start",), 120 + items / 500)

        def measure(case: str, ibi: str, present: bool = True, timeout: float = 10) -> None:
            took = shown(server, ibi, timeout, present)
            if took is None:
                missed[case] += 1
            else:
                results[case].append(took)

        for i in range(count):
            name = f"wbench-{os.getpid()}-{i}.example.org/watch/2031/01.01.00.00"
            new_item(root, name)
            measure("new levels", name)
            host, word, year = years[i % len(years)].split("/")
            inside = sorted(p.name for p in (root / host / word / year).iterdir())[0]
            renamed = f"{host}/{word}/{2100 + i}"
            os.rename(root / host / word / year, root / renamed)
            measure("subtree renamed", f"{renamed}/{inside}")
            os.rename(root / renamed, root / host / word / year)
            measure("subtree renamed", f"{host}/{word}/{year}/{inside}")
            tree = outside / f"t{i}" / "2032" / "01.01.00.00"
            new_item(tree.parent.parent.parent, f"t{i}/2032/01.01.00.00")
            os.rename(outside / f"t{i}", root / f"wbench-{os.getpid()}-{i}.example.org" / "in")
            measure("moved in", f"wbench-{os.getpid()}-{i}.example.org/in/2032/01.01.00.00")
            if lowered:
                # Stopped while the burst fills its queue: an overflow for certain.
                burst = root / f"wbench-burst-{i}"
                burst.mkdir()
                time.sleep(0.5)  # watched: its 100 new directories are 100 events
                pid = indexer_of(server)
                repaired = server.log_text().count("the inotify queue overflowed: ")
                os.kill(pid, signal.SIGSTOP)
                try:
                    for j in range(100):
                        (burst / f"d{j}").mkdir()
                finally:
                    os.kill(pid, signal.SIGCONT)
                resumed = time.perf_counter()
                name = f"wbench-{os.getpid()}-{i}.example.org/watch/2031/02.01.00.00"
                new_item(root, name)
                measure("after an overflow", name, timeout=120 + items / 5000)
                # The repair (its rescan) has logged its end before the next case begins.
                deadline = time.perf_counter() + 120 + items / 5000
                while time.perf_counter() < deadline:
                    if server.log_text().count("the inotify queue overflowed: ") > repaired:
                        repairs.append(time.perf_counter() - resumed)
                        break
                    time.sleep(0.05)
        overflowed = server.log_text().count("overflowed")
    finally:
        server.stop()
        if previous is not None:
            Path(QUEUE).write_text(previous)
        for stale in root.glob("wbench-*"):
            shutil.rmtree(stale, ignore_errors=True)
    every = [x for case, xs in results.items() if case != "after an overflow" for x in xs]
    out = {"items": items, "overflows_logged": overflowed, "queue_lowered": lowered}
    out["overflow repair"] = {"n": len(repairs), "max": max(repairs) if repairs else None}
    out["overflow repair"]["p50"] = loadgen.percentile(repairs, 0.5) if repairs else None
    cases = list(results.items()) + [("all but overflows", every)]
    cases.append(("all", every + results["after an overflow"]))
    for case, xs in cases:
        out[case] = {
            "n": len(xs),
            "missed": missed.get(case, sum(missed.values())),
            "p50": loadgen.percentile(xs, 0.5) if xs else None,
            "p95": loadgen.percentile(xs, 0.95) if xs else None,
            "p99": loadgen.percentile(xs, 0.99) if xs else None,
            "max": max(xs) if xs else None,
        }
    return out


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["floor"]:
        print(json.dumps(floor(argv[1])))
        return 0
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--items", type=int, required=True)
    parser.add_argument("--cache", type=Path, default=None)
    parser.add_argument("--work", type=Path, default=None, help="state dirs and copies")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--changes", type=int, default=0, help="cases of each kind")
    parser.add_argument("--no-setup", action="store_true")
    parser.add_argument("--out", type=Path, default=None, help="append the JSON here")
    args = parser.parse_args(argv)
    cache = args.cache or gen.default_cache()
    work = args.work or cache / "runs-watcher"
    work.mkdir(parents=True, exist_ok=True)
    result = {"when": time.strftime("%Y-%m-%d %H:%M:%S")}
    if not args.no_setup:
        result["setup"] = setup_figures(args.items, cache, work, args.rounds)
    if args.changes:
        result["changes"] = change_figures(args.items, cache, work, args.changes)
    text = json.dumps(result, indent=1)
    print(text)
    if args.out:
        with open(args.out, "a") as f:
            f.write(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
