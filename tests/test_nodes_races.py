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
