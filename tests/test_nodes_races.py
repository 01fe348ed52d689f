"""Two nodes of one Archive (one collection, one `database`, a state directory each) doing the
same thing at the same moment: real processes of ours against the real PostgreSQL of the
fixtures (tests/postgres_server.py)."""

from __future__ import annotations

import subprocess

import psycopg
import pytest
import yaml

from archive_service.common import postgres
from archive_service.protocol import pairs
from serve_process import command

BANON = "iconet.com.br/banon/2009/09.09.22.01"  # ibip LK47B6W/362SFKH, no next edition


@pytest.fixture(autouse=True)
def _pools():
    yield
    postgres.close_all()


def _deposit(collection, state_dir, database: str, *extra: str) -> subprocess.Popen:
    return command(
        [
            "deposit",
            "--collection",
            str(collection),
            "--state-dir",
            str(state_dir),
            "--archiveaddress",
            "mtc-m18.sid.inpe.br",
            "--database",
            database,
            *extra,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_two_nodes_depositing_the_next_edition_of_one_item_at_once(
    tmp_path, collection, database_url
):
    """Each node's deposit lock lives in its own state_dir: both deposits read that BANON
    has no next edition, both mint (one after the other, a second apart) and both write
    BANON's sidecar; the first new item is then an edition nobody links to. One must be
    refused (`already has a next edition`)."""
    paper = tmp_path / "paper.txt"
    paper.write_text("the second edition\n")
    children = [
        _deposit(collection, tmp_path / node, database_url, str(paper), "--nextedition-of", BANON)
        for node in ("a", "b")
    ]
    results = [(child.wait(timeout=60), *child.communicate()) for child in children]
    codes = sorted(code for code, _, _ in results)
    assert codes == [0, 1], results
    [(_, _, refused)] = [r for r in results if r[0] == 1]
    assert "already has a next edition" in refused
    [(_, printed, _)] = [r for r in results if r[0] == 0]
    data = yaml.safe_load((collection / BANON / "item.yaml").read_text())
    assert data["nextedition"] in printed
    with psycopg.connect(database_url) as conn:  # both minted through the shared state
        assert conn.execute("SELECT count(*) FROM mint_last").fetchone()[0] >= 1


@pytest.mark.parametrize("kind", ["postgresql", "sqlite"])
def test_a_day_rolled_up_on_one_node_and_reached_by_another_nodes_late_batch(
    request, tmp_path, kind
):
    """Node A rolls the 10th up; node B (its clock a few minutes behind, or its batch held
    while the database was away) then writes one more use of the 10th, which deletes the
    day's mark but not its kept figures. Until someone rolls the day up again, every report
    added the kept figures and the day computed afresh: the 10th counted twice. (SQLite:
    two workers of one node.)"""
    from datetime import UTC, date, datetime

    from archive_service.stores import stats
    from archive_service.stores.stats import counter

    item = "a.example/x/2026/01.01.00.00"
    agent = "Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0"
    midnight = datetime(2026, 1, 11, tzinfo=UTC).timestamp()
    clocks = {"a": [midnight - 60], "b": [midnight - 60]}

    def open_node(name: str) -> stats.Statistics:
        clock = clocks[name]
        if kind == "sqlite":
            return stats.Store(tmp_path / "state", clock=lambda: clock[0])
        return stats.PostgresStore(request.getfixturevalue("database_url"), lambda: clock[0])

    a, b = open_node("a"), open_node("b")

    def requests(store: stats.Statistics) -> int:
        report = store.item_report(date(2026, 1, 1), date(2026, 1, 1), "P")
        (found,) = report["Report_Items"]
        performance = found["Attribute_Performance"][0]["Performance"]
        return performance["Total_Item_Requests"]["2026-01"]

    try:
        b.record_use(stats.Seen(item, counter.REQUEST, "192.0.2.1", agent))
        b.flush()
        clocks["a"][0] = midnight + stats.ROLLUP_AFTER + 1
        assert requests(a) == 1  # and the 10th is kept
        clocks["b"][0] = midnight - 5  # B's late use of the 10th, another user
        b.record_use(stats.Seen(item, counter.REQUEST, "192.0.2.2", agent))
        b.flush()  # B's last upkeep was 55 s ago: it rolls nothing up now
        assert requests(a) == 2, "the 10th counted twice"
        assert requests(a) == 2
    finally:
        a.close()
        b.close()


def test_a_password_spelled_with_escapes_in_the_database_url_is_refused_too():
    """libpq decodes the names of the query: `?pass%77ord=` is its password. It passed the
    refusal, and a stray `%` in it had psycopg's pool log the password on every retry."""
    from serve_process import run_command

    done = run_command(
        ["db", "upgrade", "--database", "postgresql://archive@127.0.0.1:1/x?pass%77ord=sek%zzrit"]
    )
    assert done.returncode != 0 and "pgpass" in done.stderr, done
    assert "sek" not in done.stdout + done.stderr


def _counted(database: str) -> int:
    with psycopg.connect(database) as conn:
        return conn.execute("SELECT coalesce(sum(n), 0) FROM stats_counts").fetchone()[0]


def test_postgresql_restarted_under_two_serving_nodes(tmp_path, collection):
    """`pg_ctl restart` while two nodes serve: each node's pooled connections are dead. The
    nodes must go on counting acknowledgments without a restart of their own, and /health
    must be 200 again once they do."""
    import json
    from urllib.parse import urlencode

    import postgres_server as pg
    from serve_process import Serve, free_port, http_get, wait_until
    from support import acknowledgment

    reason = pg.unavailable()
    if reason:
        pytest.skip(reason)
    server = pg.PostgresServer().start()  # our own: restarted under the nodes
    nodes = []
    try:
        database = server.new_database()
        shared = f"127.0.0.1:{free_port()}"
        for name in ("a", "b"):
            nodes.append(
                Serve(
                    tmp_path,
                    *("--collection", str(collection), "--state-dir", str(tmp_path / name)),
                    *("--no-announce", "--workers", "2", "--threads", "4"),
                    *("--database", database, "--archiveaddress", shared),
                )
            )
        for node in nodes:
            node.wait_answering(timeout=60)
        a, b = nodes
        request = urlencode(
            {
                "servicesubject": "urlRequest",
                "clientinformation.ipaddress": "150.163.2.175",
                "parsedibiurl.ibi": "8JMKD3MGP7W/3EPGUE5",
            }
        )

        def acknowledge(issuer, counter) -> None:
            got = dict(pairs.parse(issuer.get(request)))
            counter.get(urlencode(acknowledgment(got)))

        def health(node) -> tuple[int, dict]:
            status, _, body = http_get(f"http://{node.address}/health")
            return status, json.loads(body)

        for _ in range(4):
            acknowledge(a, b)
            acknowledge(b, a)
        assert _counted(database) == 8
        assert [health(node)[0] for node in nodes] == [200, 200]

        server._run(
            str(server.bin / "pg_ctl"),
            "-D",
            str(server.dir / "data"),
            "-m",
            "fast",
            "-w",
            "-t",
            "60",
            "restart",
        )
        sent = 0
        for _ in range(20):
            acknowledge(a, b)
            acknowledge(b, a)
            sent += 2
        counted = _counted(database) - 8
        print(f"after the restart: {counted} of {sent} acknowledgments counted")
        # Before, each worker's pooled connection failed its first statement: 4 of 40 lost.
        assert counted == sent
        for node in nodes:
            wait_until(lambda node=node: health(node)[0] == 200, 15, "health 200 again")
        for _ in range(4):
            acknowledge(a, b)
            acknowledge(b, a)
        assert _counted(database) == 8 + counted + 8, "every acknowledgment counted again"
        for node in nodes:
            assert node.stop() == 0
    finally:
        for node in nodes:
            node.kill()
        postgres.close_all()
        server.stop()


def test_nodes_creating_the_schema_at_once_on_an_empty_database(database_url):
    """Six `db upgrade` at the same moment on an empty database: one creates everything, the
    others find it made; no duplicate-object error, no half-made schema."""
    children = [
        command(
            ["db", "upgrade", "--database", database_url],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(6)
    ]
    results = [(child.wait(timeout=60), *child.communicate()) for child in children]
    assert [code for code, _, _ in results] == [0] * 6, results
    assert sum("applied" in out for _, out, _ in results) == 1, results
    with psycopg.connect(database_url) as conn:
        versions = dict(conn.execute("SELECT component, version FROM schema_versions"))
    assert versions == {name: len(steps) for name, steps in postgres.SCHEMA.items()}


def test_a_node_of_an_older_kit_next_to_a_newer_schema_says_so(tmp_path, collection, database_url):
    """A database a newer kit upgraded: an older node still answers, its /health says the
    shared state is not used, and its log names the remedy (/health names no database)."""
    import json

    from serve_process import Serve, http_get

    postgres.upgrade(database_url)
    with psycopg.connect(database_url) as conn:
        conn.execute("UPDATE schema_versions SET version = version + 1 WHERE component = 'stats'")
    node = Serve(
        tmp_path,
        *("--collection", str(collection), "--state-dir", str(tmp_path / "old")),
        *("--no-announce", "--workers", "1", "--database", database_url),
    )
    try:
        node.wait_answering(timeout=60)
        status, _, body = http_get(f"http://{node.address}/health")
        report = json.loads(body)
        assert status == 503 and any("URL-key secret" in p for p in report["problems"]), report
        node.wait_log("upgrade the kit")
        assert node.stop() == 0
    finally:
        node.kill()


def test_two_nodes_rolling_up_the_same_days_at_once(database_url):
    """Eight stores (nodes) rolling up the same finished days at the same moment: each day's
    figures kept once, the month's report unchanged."""
    from datetime import UTC, date, datetime

    from archive_service.stores import stats
    from archive_service.stores.stats import counter
    from support import at_once

    agent = "Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0"
    start = datetime(2026, 1, 3, tzinfo=UTC).timestamp()
    clock = [start]
    writer = stats.PostgresStore(database_url, lambda: clock[0])
    for n in range(60):  # 5 days, 12 users a day
        clock[0] = start + n * 7200
        writer.record_use(stats.Seen("a/b", counter.REQUEST, f"192.0.2.{n}", agent))
    writer.flush()
    clock[0] = start + 6 * 86400
    nodes = [stats.PostgresStore(database_url, lambda: clock[0]) for _ in range(8)]
    free = list(nodes)  # one node per thread (list.pop is atomic)
    results = at_once(lambda: free.pop().roll_up(), 8)
    assert all(r is None for r in results), results
    with psycopg.connect(database_url) as conn:
        kept = conn.execute("SELECT day, requests FROM stats_uses_days ORDER BY day").fetchall()
        done = conn.execute("SELECT count(*) FROM stats_uses_days_done").fetchone()[0]
    assert [n for _, n in kept] == [12] * 5 and done == 5, kept
    report = nodes[1].item_report(date(2026, 1, 1), date(2026, 1, 1), "P")
    (item,) = report["Report_Items"]
    performance = item["Attribute_Performance"][0]["Performance"]
    assert performance["Total_Item_Requests"]["2026-01"] == 60
    for node in (writer, *nodes):
        node.close()
