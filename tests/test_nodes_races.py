"""Two nodes of one Archive (one collection, one `database`, a state directory each) doing the
same thing at the same moment: real processes of ours against the real PostgreSQL of the
fixtures (tests/postgres_server.py)."""

from __future__ import annotations

import subprocess

import psycopg
import pytest
import yaml

from archive_service.common import postgres
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

    from archive_service.web import counter, stats

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
