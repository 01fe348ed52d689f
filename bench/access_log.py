#!/usr/bin/env python3
"""What the access log costs a request (issue 35: 11-17 % of a urlRequest on main), against
the floor of the request itself, measured in the same run.

Three subjects, CPU time of this process per request, in ABBA rounds (median of the rounds):
- the floor: one urlRequest (full answer, kept) through the Archive's WSGI app in process,
  on a copy of sample_collection;
- gunicorn's generic access path as main had it: `glogging.Logger.access` (the atoms dict
  of ~40 entries, every string escaped, logging's locks, a write per line), the keys
  redacted in the atoms;
- ours (common/access.py): the line built straight from the request, written in batches.
Both logs write to /dev/null, as bench/run.py's servers do.

    python3 bench/access_log.py [--n 20000] [--rounds 5]
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import re
import shutil
import statistics
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT)]

from gunicorn import glogging  # noqa: E402
from gunicorn.config import Config  # noqa: E402

from archive_service.common import access  # noqa: E402
from archive_service.common.worker import Logger  # noqa: E402

SERVICE = "sid.inpe.br/mtc-m18@80/2008/03.17.15.17"
QUERY = (
    "servicesubject=urlRequest&clientinformation.ipaddress=127.0.0.1"
    "&parsedibiurl.ibi=8JMKD3MGP8W/35MMLL8"
    "&parsedibiurl.verblist=GetLastEdition%20GetTranslation%20GetMetadata(oai_dc)"
)


# main's check before redacting (one pattern; common/access.py now has two, faster)
MAIN_MAYBE_SECRET = re.compile(
    r"(?:^|[?&;])(?:[^=&;?\s%]*%|(?:" + "|".join(sorted(access.SECRET_NAMES)) + ")=)",
    re.IGNORECASE,
)


class Generic(glogging.Logger):
    """main's Logger.access: gunicorn's own path, keys redacted in its atoms."""

    def atoms(self, resp, req, environ, request_time):
        found = super().atoms(resp, req, environ, request_time)
        sent = (environ.get("QUERY_STRING") or "", environ.get("HTTP_REFERER") or "")
        if not any(MAIN_MAYBE_SECRET.search(text) for text in sent):
            return found
        for atom in ("r", "q", "f", "{raw_uri}e", "{query_string}e"):
            if isinstance(found.get(atom), str):
                found[atom] = access.redact(found[atom])
        return found


class Resp:
    status, sent = "200 OK", 412
    headers = [("Content-Type", "text/plain; charset=utf-8"), ("Content-Length", "412")]


class Req:
    headers = [("Host", "127.0.0.1:8080"), ("User-Agent", "wrk"), ("Accept", "*/*")]


def environ() -> dict:
    env = {
        "REQUEST_METHOD": "GET",
        "RAW_URI": f"/{SERVICE}?{QUERY}",
        "PATH_INFO": f"/{SERVICE}",
        "QUERY_STRING": QUERY,
        "SERVER_PROTOCOL": "HTTP/1.1",
        "REMOTE_ADDR": "127.0.0.1",
        "HTTP_HOST": "127.0.0.1:8080",
        "HTTP_USER_AGENT": "wrk",
        "HTTP_ACCEPT": "*/*",
        "wsgi.url_scheme": "http",
        "SERVER_NAME": "127.0.0.1",
        "SERVER_PORT": "8080",
        "SCRIPT_NAME": "",
    }
    return env


def loggers(devnull) -> dict:
    cfg = Config()
    cfg.set("accesslog", "-")
    saved = sys.stdout
    sys.stdout = devnull  # gunicorn's access handler takes sys.stdout as it is at setup
    try:
        made = {"generic": Generic(cfg), "ours": Logger(cfg)}
    finally:
        sys.stdout = saved
    return made


def floor(n: int):
    from werkzeug.test import EnvironBuilder

    from archive_service.web import create_app

    base = Path(tempfile.mkdtemp(prefix="bench-access-"))
    shutil.copytree(ROOT / "sample_collection", base / "collection", symlinks=True)
    app = create_app(
        {
            "collection": str(base / "collection"),
            "archiveaddress": "localhost",
            "archiveserviceibi": SERVICE,
            "resolver": "none",
            "state_dir": str(base / "state"),
        }
    )
    env = EnvironBuilder(path=f"/{SERVICE}", query_string=QUERY).get_environ()

    def run() -> None:
        for _ in range(n):
            body = app(dict(env), lambda *a, **k: None)
            b"".join(body)
            getattr(body, "close", lambda: None)()

    run()  # the kept answer, the index opened
    return run, base


def timed(run) -> float:
    started = time.process_time()
    run()
    return time.process_time() - started


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=20000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args(argv)
    logging.getLogger("gunicorn.error").disabled = True
    devnull = open(os.devnull, "w")  # noqa: SIM115 (open for the whole run)
    made = loggers(devnull)
    made["ours"].access_lines.fd = devnull.fileno()
    env, took = environ(), timedelta(microseconds=1234)
    request, base = floor(args.n // 10)

    def logging_run(name: str):
        log = made[name]

        def run() -> None:
            for _ in range(args.n):
                log.access(Resp, Req, env, took)
            flush = getattr(log, "access_lines", None)
            if flush is not None:
                flush.flush()

        return run

    subjects = {"request": request, "generic": logging_run("generic"), "ours": logging_run("ours")}
    per = {name: [] for name in subjects}
    for number in range(args.rounds):
        order = list(subjects) if number % 2 == 0 else list(reversed(subjects))
        for name in order:
            n = args.n // 10 if name == "request" else args.n
            per[name].append(timed(subjects[name]) / n * 1e6)
    shutil.rmtree(base, ignore_errors=True)
    us = {name: statistics.median(values) for name, values in per.items()}
    result = {
        "loadavg": Path("/proc/loadavg").read_text().split()[:3],
        "us_per_request": round(us["request"], 1),
        "us_per_line": {"generic": round(us["generic"], 2), "ours": round(us["ours"], 2)},
        "share_of_request": {
            "generic": round(us["generic"] / us["request"], 3),
            "ours": round(us["ours"] / us["request"], 3),
        },
        "ours_over_generic": round(us["ours"] / us["generic"], 3),
    }
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
