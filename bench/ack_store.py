"""Acknowledgment throughput of the statistics stores on one node (issue 19): PostgreSQL (the
`database` setting) ÷ SQLite in the state directory (the default).

    python bench/ack_store.py [--rounds 5] [--acks 2000] [--threads 1,8] [--app]

Each round counts `--acks` acknowledgments, every one a fresh head (so each is an INSERT into
the seen keys and an upsert of a count: the service's common case), through
`Statistics.acknowledge` of each store, SQLite and PostgreSQL alternating in ABBA order; the
figure is the median of the per-round ratios. The PostgreSQL server is a throwaway cluster of
Debian's binaries on loopback (tests/postgres_server.py, fsync off as in the tests: the ratio
is the store's code and round trips, not the disk; SQLite keeps its own synchronous=NORMAL
WAL). In process, no HTTP: a request's own cost would only compress the ratio toward 1.
With --app, a second figure: whole acknowledgment requests (the sample collection, keys from
urlRequests made beforehand) through the app of `create_app`, called as WSGI in one thread.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from archive_service.common import postgres  # noqa: E402
from archive_service.protocol.urlkeys import UrlKeys  # noqa: E402
from archive_service.stores import stats  # noqa: E402

SERVICE = "sid.inpe.br/mtc-m18@80/2008/03.17.15.17"  # the sample collection's
ITEM = "8JMKD3MGP7W/3EPGUE5"
URL = "http://bench.example.org/col/sid.inpe.br/bench/2024/01.01.00.00/doc/a.pdf"


def one_round(store: stats.Statistics, keys: UrlKeys, acks: int, threads: int) -> float:
    """Acknowledgments counted per second."""
    heads = [keys.issue([URL]) for _ in range(acks)]
    share = [heads[i::threads] for i in range(threads)]
    counted = []

    def work(mine):
        n = 0
        for key in mine:
            ack = stats.Acknowledgment(key, URL, "Data", "Original", "sid.inpe.br/bench/x")
            n += store.acknowledge(ack, keys) == "counted"
        counted.append(n)

    workers = [threading.Thread(target=work, args=(s,)) for s in share]
    start = time.perf_counter()
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    took = time.perf_counter() - start
    if sum(counted) != acks:
        raise SystemExit(f"{type(store).__name__} counted {sum(counted)} of {acks}")
    return acks / took


def abba(title: str, rounds: int, measure: Callable[[str], float]) -> None:
    """`measure('sqlite')` and `measure('postgresql')` in ABBA order; prints the median ratio."""
    ratios, rates = [], {"sqlite": [], "postgresql": []}
    for r in range(rounds):
        order = ["sqlite", "postgresql"] if r % 2 == 0 else ["postgresql", "sqlite"]
        got = {name: measure(name) for name in order}
        for name in order:
            rates[name].append(got[name])
        ratios.append(got["postgresql"] / got["sqlite"])
    print(
        f"{title}: PostgreSQL ÷ SQLite {statistics.median(ratios):.2f}× "
        f"(rounds {', '.join(f'{x:.2f}' for x in ratios)}; medians "
        f"{statistics.median(rates['postgresql']):,.0f} vs "
        f"{statistics.median(rates['sqlite']):,.0f} acknowledgments/s)"
    )


def app_round(app, queries: list[str]) -> float:
    """Acknowledgment requests answered per second by `app` (WSGI, in process)."""
    from werkzeug.test import EnvironBuilder

    environs = [EnvironBuilder(path="/" + SERVICE, query_string=q).get_environ() for q in queries]
    start = time.perf_counter()
    for environ in environs:
        body = b"".join(app(environ, lambda status, headers: None))
        if body != b"notice {acknowledgment received}":
            raise SystemExit(f"unexpected answer {body!r}")
    return len(environs) / (time.perf_counter() - start)


def app_figure(server, state: str, rounds: int, acks: int) -> None:
    from urllib.parse import urlencode

    from werkzeug.test import Client

    from archive_service.protocol import pairs
    from archive_service.web import create_app

    apps = {}
    for name, database in (("sqlite", ""), ("postgresql", server.new_database())):
        apps[name] = create_app(
            {
                "collection": str(ROOT / "sample_collection"),
                "archiveaddress": "bench.example.org",
                "archiveserviceibi": SERVICE,
                "resolver": "none",
                "state_dir": str(Path(state) / f"app-{name}"),
                "database": database,
            }
        )

    def queries(app) -> list[str]:
        client = Client(app)
        found = []
        for _ in range(acks):
            text = client.get(
                "/" + SERVICE,
                query_string={
                    "servicesubject": "urlRequest",
                    "clientinformation.ipaddress": "150.163.2.175",
                    "parsedibiurl.ibi": ITEM,
                },
            ).get_data(as_text=True)
            got = dict(pairs.parse(text))
            found.append(
                urlencode(
                    {
                        "servicesubject": "acknowledgment",
                        "clientinformation.ipaddress": "150.163.2.175",
                        "contenttype": got["contenttype"],
                        "url": got["url"],
                        "url.persistent": "http://urlib.net/" + ITEM,
                        "urlkey": got["urlkey"],
                    }
                )
            )
        return found

    app_round(apps["sqlite"], queries(apps["sqlite"])[:50])  # warm up
    app_round(apps["postgresql"], queries(apps["postgresql"])[:50])
    abba(
        "whole requests (create_app, WSGI, 1 thread)",
        rounds,
        lambda name: app_round(apps[name], queries(apps[name])),
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--acks", type=int, default=2000)
    parser.add_argument("--threads", default="1,8")
    parser.add_argument("--app", action="store_true", help="also whole requests through the app")
    args = parser.parse_args()
    import postgres_server

    reason = postgres_server.unavailable()
    if reason:
        print(f"ack_store: {reason}", file=sys.stderr)
        return 2
    server = postgres_server.PostgresServer().start()
    try:
        keys = UrlKeys.ephemeral()
        with tempfile.TemporaryDirectory() as state:
            for threads in [int(t) for t in args.threads.split(",")]:
                database = server.new_database()
                sqlite = stats.open_store(Path(state) / f"t{threads}", "")
                shared = stats.open_store(state, database)
                one_round(sqlite, keys, 50, threads)  # warm up: schema, pool, connections
                one_round(shared, keys, 50, threads)
                stores = {"sqlite": sqlite, "postgresql": shared}
                abba(
                    f"{threads} thread(s)",
                    args.rounds,
                    lambda name: one_round(stores[name], keys, args.acks, threads),  # noqa: B023
                )
                sqlite.close()
            if args.app:
                app_figure(server, state, args.rounds, args.acks)
    finally:
        postgres.close_all()
        server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
