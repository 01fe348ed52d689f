#!/usr/bin/env python3
"""Soak: a real `archive-service serve` on loopback, hammered while its collection churns.

    python3 bench/soak.py [--seconds 20] [--clients 4] [--workers 2] [--churn-rate 20]

Not part of the test suite (it runs for a bounded time at full rate). It starts the server on
a copy of sample_collection in a temporary directory, measures a floor (the rate of the
cheapest request, inclusionConfirmationRequest, with the same clients), then for --seconds:

- client processes send, as fast as the server answers, urlRequests (sample items and churned
  items), downloads of the URLs answered, and acknowledgments of those answers (valid ones,
  replays and forged keys);
- a churn process adds, edits (file contents, sidecar state) and deletes items under
  `soak.example/churn/…`, each change atomic (renames), journaled with its time.

Then it checks: zero 5xx; zero malformed bodies (Table 4.2, ASCII, sorted; downloads as long as
their Content-Length); every answer consistent with the collection at some moment up to the
answer (sample items: exactly the answer at start; churned items: a state they had, a version of
the file that was written); `archive-service stats --format json` counting exactly the valid
acknowledgments sent (total; but those of items deleted before their acknowledgment, refused as
`unknown`) and the refused ones (rejected). It prints the figures (and
--json FILE writes them) and exits 1 if any check failed. Everything it starts is stopped.

Until the index follows the disk, the server answers for the collection as it was at start:
churned items added later are unknown to it (empty answers, consistent with a past moment),
deleted ones get no URL. The `lag` figure says how old the state an answer matched was.
"""

from __future__ import annotations

import argparse
import hashlib
import http.client
import json
import multiprocessing
import os
import random
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import quote, urlencode, urlsplit

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from archive_service.protocol import pairs  # noqa: E402

SAMPLE = ROOT / "sample_collection"
SERVICE = "sid.inpe.br/mtc-m18@80/2008/03.17.15.17"
CHURN_PREFIX = "soak.example/churn/2024"
CHURN_SLOTS = 40  # churned items are soak.example/churn/2024/01.01.00.<slot>
SAMPLE_IBIS = [
    "8JMKD3MGP8W/35MMLL8",
    "8JMKD3MGP7W/3EPGUE5",
    "LK47B6W/362SFKH",
    "sid.inpe.br/mtc-m18@80/2009/07.21.13.23",
    "dpi.inpe.br/banon/2003/12.10.19.30",
    "iconet.com.br/banon/2010/01.20.11.05",
    "iconet.com.br/banon/2012/03.05.08.15",
    "sid.inpe.br/mtc-m18/2012/07.12.18.08",
]
SAMPLE_VERBS = ["", "GetTranslation", "GetMetadata(oai_dc)", "GetLastEdition", "GetFileList"]
MAX_SECONDS = 600


def slot_dir(slot: int) -> str:
    return f"{CHURN_PREFIX}/01.01.00.{slot:02d}"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


# ------------------------------------------------------------------------------ churn


def churn(collection: str, journal: str, rate: float, deadline: float, seed: int) -> None:
    """Add, edit and delete items at `rate` changes a second until `deadline`; every change
    is one rename, journaled as {t0, t1, slot, what, value} (value: content hash or state)."""
    rng = random.Random(seed)
    root = Path(collection)
    staging = root.parent / "staging"
    staging.mkdir(exist_ok=True)
    present: dict[int, bool] = {}
    counter = 0
    with open(journal, "a") as log:

        def record(t0: float, slot: int, what: str, value: str | None) -> None:
            log.write(
                json.dumps(
                    {"t0": t0, "t1": time.time(), "slot": slot, "what": what, "value": value}
                )
                + "\n"
            )
            log.flush()

        def content() -> tuple[bytes, str]:
            data = f"version {counter}\n".encode() + rng.randbytes(rng.randint(100, 200_000))
            return data, hashlib.sha256(data).hexdigest()

        while time.time() < deadline:
            counter += 1
            slot = rng.randrange(CHURN_SLOTS)
            item = root / slot_dir(slot)
            if not present.get(slot):  # add: build it aside, then one rename into place
                data, digest = content()
                state = rng.choice(["Original", "Copy"])
                fresh = staging / f"item{counter}"
                (fresh / "doc").mkdir(parents=True)
                (fresh / "doc" / "file.txt").write_bytes(data)
                (fresh / "item.yaml").write_text(f"state: {state}\n")
                item.parent.mkdir(parents=True, exist_ok=True)
                t0 = time.time()
                os.rename(fresh, item)
                record(t0, slot, "add", json.dumps([digest, state]))
                present[slot] = True
            else:
                action = rng.choices(["edit", "state", "delete"], [5, 2, 2])[0]
                if action == "edit":
                    data, digest = content()
                    staged = staging / f"file{counter}"
                    staged.write_bytes(data)
                    t0 = time.time()
                    os.replace(staged, item / "doc" / "file.txt")
                    record(t0, slot, "content", digest)
                elif action == "state":
                    state = rng.choice(["Original", "Copy"])
                    staged = staging / f"yaml{counter}"
                    staged.write_text(f"state: {state}\n")
                    t0 = time.time()
                    os.replace(staged, item / "item.yaml")
                    record(t0, slot, "state", state)
                else:
                    gone = staging / f"gone{counter}"
                    t0 = time.time()
                    os.rename(item, gone)
                    record(t0, slot, "delete", None)
                    shutil.rmtree(gone)
                    present[slot] = False
            time.sleep(max(0.0, rng.expovariate(rate)))


@dataclass
class Timeline:
    """What one churned item was, change by change: (t0, t1, present, contents, state)."""

    changes: list[tuple[float, float, bool, str | None, str | None]] = field(default_factory=list)

    def states_until(self, moment: float):
        """Every state the item was in at some time <= moment, with when it stopped being it
        (None: still is); the state before the first change is `absent`."""
        states = [(False, None, None, self.changes[0][1] if self.changes else None)]
        for index, (t0, _, present, digest, state) in enumerate(self.changes):
            if t0 > moment:
                break
            until = self.changes[index + 1][1] if index + 1 < len(self.changes) else None
            states.append((present, digest, state, until))
        return states


def read_journal(path: str) -> dict[int, Timeline]:
    timelines: dict[int, Timeline] = defaultdict(Timeline)
    current: dict[int, tuple[bool, str | None, str | None]] = {}
    with open(path) as stream:
        for line in stream:
            entry = json.loads(line)
            slot = entry["slot"]
            present, digest, state = current.get(slot, (False, None, None))
            if entry["what"] == "add":
                digest, state = json.loads(entry["value"])
                present = True
            elif entry["what"] == "content":
                digest = entry["value"]
            elif entry["what"] == "state":
                state = entry["value"]
            else:
                present, digest, state = False, None, None
            current[slot] = (present, digest, state)
            timelines[slot].changes.append((entry["t0"], entry["t1"], present, digest, state))
    return timelines


# ---------------------------------------------------------------------------- clients


def get(port: int, path: str) -> tuple[int, bytes, int | None]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        conn.request("GET", path)
        response = conn.getresponse()
        body = response.read()
        length = response.getheader("Content-Length")
        return response.status, body, int(length) if length is not None else None
    finally:
        conn.close()


def floor_client(port: int, deadline: float, out) -> None:
    count = 0
    path = f"/{SERVICE}?servicesubject=inclusionConfirmationRequest"
    while time.time() < deadline:
        status, body, _ = get(port, path)
        count += status == 200 and body == b"confirmation yes"
    out.put(count)


def soak_client(port: int, address: str, deadline: float, seed: int, out) -> None:
    """Requests at full rate; records observations, checked after the run."""
    rng = random.Random(seed)
    obs: list[dict] = []
    acks = Counter()
    latencies: dict[str, list[float]] = defaultdict(list)

    def timed(kind: str, path: str) -> tuple[int, bytes, int | None, float, float]:
        t0 = time.time()
        status, body, length = get(port, path)
        t1 = time.time()
        latencies[kind].append(t1 - t0)
        return status, body, length, t0, t1

    def url_request(ibi: str, verbs: str = "") -> str:
        params = {
            "servicesubject": "urlRequest",
            "clientinformation.ipaddress": "150.163.2.175",
            "parsedibiurl.ibi": ibi,
        }
        if verbs:
            params["parsedibiurl.verblist"] = verbs
        return f"/{SERVICE}?" + urlencode(params, quote_via=quote)

    while time.time() < deadline:
        if rng.random() < 0.5:
            slot = rng.randrange(CHURN_SLOTS)
            ibi, verbs = slot_dir(slot), ""
        else:
            slot, ibi, verbs = None, rng.choice(SAMPLE_IBIS), rng.choice(SAMPLE_VERBS)
        status, body, length, t0, t1 = timed("urlRequest", url_request(ibi, verbs))
        obs.append(
            {
                "kind": "urlRequest",
                "slot": slot,
                "ibi": ibi,
                "verbs": verbs,
                "status": status,
                "body": body.decode("latin-1"),
                "t0": t0,
                "t1": t1,
            }
        )
        if slot is not None and rng.random() < 0.2:  # a churned file, asked for directly
            path = f"/col/{ibi}/doc/file.txt"
            dstatus, data, length, d0, d1 = timed("download", path)
            obs.append(
                {
                    "kind": "download",
                    "slot": slot,
                    "path": path,
                    "status": dstatus,
                    "sha256": hashlib.sha256(data).hexdigest(),
                    "size": len(data),
                    "length": length,
                    "t0": d0,
                    "t1": d1,
                }
            )
        if status != 200:
            continue
        try:
            got = dict(pairs.parse(body.decode("ascii")))
        except (UnicodeDecodeError, pairs.PairsError):
            continue  # counted as malformed by the checker
        urls = [(n, v) for n, v in got.items() if n.startswith("url") and n != "urlkey"]
        if not urls:
            continue
        name, url = rng.choice(urls)
        parts = urlsplit(url)
        if parts.netloc == address and parts.path.startswith("/col/") and rng.random() < 0.6:
            status, data, length, d0, d1 = timed("download", parts.path)
            obs.append(
                {
                    "kind": "download",
                    "slot": slot,
                    "path": parts.path,
                    "status": status,
                    "sha256": hashlib.sha256(data).hexdigest(),
                    "size": len(data),
                    "length": length,
                    "t0": d0,
                    "t1": d1,
                }
            )
        if rng.random() < 0.7:
            qualifier = name[len("url") :]
            params = {
                "servicesubject": "acknowledgment",
                "clientinformation.ipaddress": "150.163.2.175",
                "contenttype": got.get("contenttype" + qualifier, "Data"),
                "state": got.get("state" + qualifier, "Original"),
                "url": url,
                "url.persistent": f"http://urlib.net/{ibi}",
                "urlkey": got["urlkey"],
            }
            roll = rng.random()
            kinds = ["valid"] + (["replay"] if roll < 0.1 else [])
            if 0.1 <= roll < 0.2:  # another nonce: every tag of the key is wrong for it
                key = got["urlkey"]
                params["urlkey"] = key[:12] + str((int(key[12]) + 1) % 10) + key[13:]
                kinds = ["forged"]
            for kind in kinds:
                status, body, _, a0, a1 = timed(
                    "acknowledgment", f"/{SERVICE}?" + urlencode(params)
                )
                ok = status == 200 and body == b"notice {acknowledgment received}"
                acks[kind if ok else "failed"] += 1
                obs.append(
                    {
                        "kind": "acknowledgment",
                        "status": status,
                        "body": body.decode("latin-1"),
                        "t0": a0,
                        "t1": a1,
                    }
                )
    out.put((obs, dict(acks), dict(latencies)))


def run_clients(target, count: int, args_for) -> list:
    context = multiprocessing.get_context("fork")
    queue = context.Queue()
    procs = [context.Process(target=target, args=(*args_for(i), queue)) for i in range(count)]
    for proc in procs:
        proc.start()
    results = [queue.get() for _ in procs]
    for proc in procs:
        proc.join()
    return results


# ---------------------------------------------------------------------------- checking


def expected_sample_answers(port: int) -> dict[tuple[str, str], list]:
    out = {}
    for ibi in SAMPLE_IBIS:
        for verbs in SAMPLE_VERBS:
            params = {
                "servicesubject": "urlRequest",
                "clientinformation.ipaddress": "150.163.2.175",
                "parsedibiurl.ibi": ibi,
            }
            if verbs:
                params["parsedibiurl.verblist"] = verbs
            status, body, _ = get(port, f"/{SERVICE}?" + urlencode(params, quote_via=quote))
            assert status == 200, body
            out[ibi, verbs] = [p for p in pairs.parse(body.decode("ascii")) if p[0] != "urlkey"]
    return out


def sample_files() -> dict[str, str]:
    digests = {}
    for path in SAMPLE.rglob("*"):
        if path.is_file() and "/doc/" in str(path):
            rel = path.relative_to(SAMPLE).as_posix()
            digests["/col/" + quote(os.fsencode(rel), safe="/@:!$&'()*+,;=-._~")] = hashlib.sha256(
                path.read_bytes()
            ).hexdigest()
    return digests


def check(
    observations: list[dict],
    timelines: dict[int, Timeline],
    expected: dict,
    files: dict[str, str],
    address: str,
) -> tuple[Counter, list[str], list[float]]:
    problems: list[str] = []
    tally: Counter = Counter()
    lags: list[float] = []

    def problem(kind: str, text: str) -> None:
        tally[kind] += 1
        if len(problems) < 20:
            problems.append(f"{kind}: {text}")

    for ob in observations:
        tally[ob["kind"]] += 1
        if ob["status"] >= 500:
            problem("5xx", f"{ob['status']} {ob}")
            continue
        if ob["kind"] == "acknowledgment":
            if ob["status"] != 200 or ob["body"] != "notice {acknowledgment received}":
                problem("malformed", f"acknowledgment answered {ob['status']} {ob['body']!r}")
            continue
        if ob["kind"] == "download":
            if ob["status"] == 200 and ob["length"] != ob["size"]:
                problem("malformed", f"download of {ob['size']} bytes said {ob['length']}")
                continue
            if ob["slot"] is None:
                if ob["status"] != 200 or files.get(ob["path"]) != ob["sha256"]:
                    problem("inconsistent", f"sample file {ob['path']} {ob['status']}")
                continue
            states = timelines[ob["slot"]].states_until(ob["t1"])
            tally["churned_downloads"] += 1
            tally["churned_downloads_served"] += ob["status"] == 200
            if ob["status"] == 200:
                match = [until for present, digest, _, until in states if digest == ob["sha256"]]
                if not match:
                    problem("inconsistent", f"download {ob['path']} is no version ever written")
                else:
                    lags.append(max(0.0, ob["t0"] - max(u or ob["t0"] for u in match)))
            elif ob["status"] != 404 or all(present for present, *_ in states):
                problem("inconsistent", f"download {ob['path']} {ob['status']} while it existed")
            continue
        # urlRequest
        if ob["status"] != 200:
            problem("malformed", f"urlRequest {ob['ibi']} answered {ob['status']}")
            continue
        body = ob["body"]
        try:
            got = pairs.parse(body)
        except pairs.PairsError as exc:
            problem("malformed", f"{exc}: {body[:80]!r}")
            continue
        if body != pairs.render(got):
            problem("malformed", "pairs not sorted or not CRLF")
            continue
        answer = dict(got)
        if ("urlkey" in answer) != any(n.startswith("url") and n != "urlkey" for n in answer):
            problem("inconsistent", f"urlkey without url or url without urlkey: {answer}")
        if ob["slot"] is None:
            if [p for p in got if p[0] != "urlkey"] != expected[ob["ibi"], ob["verbs"]]:
                problem("inconsistent", f"sample {ob['ibi']} {ob['verbs']!r} changed: {answer}")
            continue
        states = timelines[ob["slot"]].states_until(ob["t1"])
        tally["churned_requests"] += 1
        tally["churned_requests_known"] += bool(answer)
        if not answer:
            if all(present for present, *_ in states):
                problem("inconsistent", f"empty answer for {ob['ibi']} which always existed")
            continue
        url = answer.get("url")
        want = f"http://{address}/col/{ob['ibi']}/doc/file.txt"
        matching = [
            until
            for present, _, state, until in states
            if present and state == answer.get("state", state)
        ]
        if url is not None and url != want:
            problem("inconsistent", f"url {url} for {ob['ibi']}")
        elif not matching:
            problem("inconsistent", f"{ob['ibi']} answered {answer} but was never so")
        else:
            lags.append(max(0.0, ob["t0"] - max(u or ob["t0"] for u in matching)))
    return tally, problems, lags


# ------------------------------------------------------------------------------- main


def percentile(values: list[float], q: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=20, help="soak duration (max 600)")
    parser.add_argument("--floor-seconds", type=float, default=3, help="floor measurement duration")
    parser.add_argument("--clients", type=int, default=4, help="client processes")
    parser.add_argument("--workers", type=int, default=2, help="gunicorn workers")
    parser.add_argument("--churn-rate", type=float, default=20, help="collection changes a second")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--json", metavar="FILE", help="also write the figures here")
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory")
    args = parser.parse_args(argv)
    seconds = min(args.seconds, MAX_SECONDS)

    work = Path(tempfile.mkdtemp(prefix="archive-service-soak-"))
    collection, state, journal = work / "collection", work / "state", work / "churn.jsonl"
    shutil.copytree(SAMPLE, collection, symlinks=True)
    journal.touch()
    port = free_port()
    address = f"127.0.0.1:{port}"
    log = open(work / "serve.log", "wb")
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "archive_service.cli",
            "serve",
            "--collection",
            str(collection),
            "--archiveaddress",
            address,
            "--archiveserviceibi",
            SERVICE,
            "--state-dir",
            str(state),
            "--bind",
            address,
            "--workers",
            str(args.workers),
            "--resolver",
            "none",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
        cwd=ROOT,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
        start_new_session=True,
    )
    churner = None
    try:
        for _ in range(200):
            try:
                if get(port, f"/{SERVICE}?servicesubject=inclusionConfirmationRequest")[0] == 200:
                    break
            except OSError:
                time.sleep(0.05)
        else:
            raise SystemExit("soak: the server did not start; see " + str(work / "serve.log"))
        expected = expected_sample_answers(port)

        floor_end = time.time() + args.floor_seconds
        floor = sum(run_clients(floor_client, args.clients, lambda i: (port, floor_end)))
        floor_rate = floor / args.floor_seconds

        deadline = time.time() + seconds
        context = multiprocessing.get_context("fork")
        churner = context.Process(
            target=churn, args=(str(collection), str(journal), args.churn_rate, deadline, args.seed)
        )
        churner.start()
        started = time.time()
        results = run_clients(
            soak_client, args.clients, lambda i: (port, address, deadline, args.seed * 1000 + i)
        )
        elapsed = time.time() - started
        churner.join(30)

        observations = [ob for obs, _, _ in results for ob in obs]
        acks: Counter = Counter()
        latencies: dict[str, list[float]] = defaultdict(list)
        for _, sent, lat in results:
            acks.update(sent)
            for kind, values in lat.items():
                latencies[kind] += values
        tally, problems, lags = check(
            observations, read_journal(str(journal)), expected, sample_files(), address
        )
        report = subprocess.run(
            [
                sys.executable,
                "-m",
                "archive_service.cli",
                "stats",
                "--state-dir",
                str(state),
                "--format",
                "json",
            ],
            capture_output=True,
            text=True,
            check=True,
            cwd=ROOT,
            env=dict(os.environ, PYTHONPATH=str(ROOT)),
        )
        counted = json.loads(report.stdout)
    finally:
        if churner is not None and churner.is_alive():
            churner.terminate()
        os.killpg(server.pid, signal.SIGTERM)
        try:
            server.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait()
        log.close()

    changes = sum(len(t.changes) for t in read_journal(str(journal)).values())
    requests = sum(tally[k] for k in ("urlRequest", "download", "acknowledgment"))
    figures = {
        "seconds": round(elapsed, 1),
        "clients": args.clients,
        "workers": args.workers,
        "cpus": os.cpu_count(),
        "floor_rate": round(floor_rate, 1),
        "requests": requests,
        "rate": round(requests / elapsed, 1),
        "rate_vs_floor": round(requests / elapsed / floor_rate, 2) if floor_rate else None,
        "by_kind": {k: tally[k] for k in ("urlRequest", "download", "acknowledgment")},
        "latency_ms": {
            k: {
                "p50": round(percentile(v, 0.5) * 1000, 1),
                "p99": round(percentile(v, 0.99) * 1000, 1),
            }
            for k, v in sorted(latencies.items())
        },
        "collection_changes": changes,
        "churned_items_seen": {
            "urlRequests": tally["churned_requests"],
            "answered_known": tally["churned_requests_known"],
            "downloads": tally["churned_downloads"],
            "served": tally["churned_downloads_served"],
        },
        "errors_5xx": tally["5xx"],
        "malformed": tally["malformed"],
        "inconsistent": tally["inconsistent"],
        "lag_s": {
            "median": round(statistics.median(lags), 2) if lags else 0,
            "max": round(max(lags), 2) if lags else 0,
        },
        "acks_sent": dict(acks),
        "stats_total": counted["total"],
        "stats_rejected": counted["rejected"],
        "stats_rejected_by_reason": counted.get("rejected_by_reason", {}),
    }
    refused = figures["stats_rejected_by_reason"]
    unknown = refused.get("unknown", 0)
    checks = {
        "no 5xx": tally["5xx"] == 0,
        "no malformed body": tally["malformed"] == 0,
        "every answer matches a moment of the collection": tally["inconsistent"] == 0,
        # An item deleted between its answer and the acknowledgment is no item held here: the
        # acknowledgment (or its replay) is refused as `unknown`, not counted.
        "stats total == valid acknowledgments sent, but those of items deleted since": acks["valid"]
        - unknown
        <= counted["total"]
        <= acks["valid"],
        "stats total + rejected == acknowledgments sent": counted["total"] + counted["rejected"]
        == acks["valid"] + acks["replay"] + acks["forged"],
        "forged keys refused as forged": refused.get("forged", 0) == acks["forged"],
        "every acknowledgment answered with the notice": acks["failed"] == 0,
    }
    figures["checks"] = checks
    print(json.dumps(figures, indent=2))
    for line in problems:
        print("  " + line)
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=2) + "\n")
    if args.keep:
        print(f"kept {work}")
    else:
        shutil.rmtree(work, ignore_errors=True)
    failed = [name for name, ok in checks.items() if not ok]
    print("soak: " + ("all checks passed" if not failed else "FAILED: " + "; ".join(failed)))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
