"""Several nodes sharing one PostgreSQL database (the `database` setting, issue 19): the
urlkey secret, the acknowledgments counted once and the statistics read anywhere. Two
create_app with the same database and different state_dirs stand for two nodes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from decimal import Decimal
from urllib.parse import urlencode

import psycopg
import pytest

from archive_service import cli
from archive_service.common import postgres
from archive_service.deposit import mint
from archive_service.protocol import pairs, urlkeys
from archive_service.stores import stats
from archive_service.stores import urlkeys as secret_store
from archive_service.web import create_app
from serve_process import ROOT, Serve, free_port, run_command
from support import Client, acknowledgment, at_once

NOTICE = "notice {acknowledgment received}"
RELATORIO = "8JMKD3MGP7W/3EPGUE5"  # sid.inpe.br/mtc-m19/2013/09.04.12.27.57
OAIS = "8JMKD3MGP8W/35MMLL8"


@pytest.fixture(autouse=True)
def _pools():
    yield
    postgres.close_all()


def node(settings: dict, tmp_path, name: str, database: str) -> Client:
    own = {**settings, "state_dir": str(tmp_path / name), "database": database}
    return Client(create_app(own), "")


def answer(client: Client, ibi: str) -> dict[str, str]:
    return dict(pairs.parse(client.url_request(ibi).text))


def url_request(ibi: str) -> dict[str, str]:
    return {
        "servicesubject": "urlRequest",
        "clientinformation.ipaddress": "150.163.2.175",
        "parsedibiurl.ibi": ibi,
    }


def ack(client: Client, got: dict[str, str]) -> None:
    assert client.service(**acknowledgment(got)).text == NOTICE


def stats_json(capsys, state_dir: str, database: str) -> dict:
    argv = ["stats", "--state-dir", state_dir, "--database", database, "--format", "json"]
    assert cli.main(argv) == 0
    return json.loads(capsys.readouterr().out)


def test_a_key_node_a_issued_counts_once_on_node_b_and_replays_are_refused_anywhere(
    settings, tmp_path, database_url, capsys
):
    a = node(settings, tmp_path, "a", database_url)
    b = node(settings, tmp_path, "b", database_url)
    got = answer(a, RELATORIO)
    ack(b, got)  # the resolver's acknowledgment reaches the other node
    ack(a, got)  # a replay, on the node that issued the key
    ack(b, got)  # and on the other
    other = answer(b, OAIS)
    ack(a, other)
    for state_dir in (tmp_path / "a", tmp_path / "b"):
        report = stats_json(capsys, str(state_dir), database_url)
        assert (report["total"], report["rejected"]) == (2, 2), report
        assert report["rejected_by_reason"] == {"replay": 2}
    # Nothing of the shared state went to either node's state_dir.
    for name in ("a", "b"):
        assert not (tmp_path / name / stats.DB_FILE).exists()
        assert not (tmp_path / name / secret_store.SECRET_FILE).exists()


def test_the_statistics_page_shows_the_same_counts_on_every_node(settings, tmp_path, database_url):
    a = node(settings, tmp_path, "a", database_url)
    b = node(settings, tmp_path, "b", database_url)
    for _ in range(3):
        ack(b, answer(a, RELATORIO))
    pages = [n.get("/" + settings["archiveserviceibi"] + "/statistics").text for n in (a, b)]
    assert pages[0] == pages[1]
    assert "sid.inpe.br/mtc-m19/2013/09.04.12.27.57" in pages[0]


def test_nodes_starting_together_share_one_secret(database_url):
    # Threads of one process share its pool; each start is an INSERT then a SELECT.
    found = at_once(lambda: secret_store.load_shared_secret(database_url), 8)
    assert len(set(found)) == 1 and len(found[0]) == urlkeys.SECRET_BYTES
    with psycopg.connect(database_url) as conn:
        assert conn.execute("SELECT count(*) FROM urlkey_secret").fetchone() == (1,)


def test_acknowledgments_racing_on_two_nodes_count_once(settings, tmp_path, database_url):
    """The same head acknowledged at once on 2 nodes × 4 threads: counted exactly once."""
    keys = secret_store.of_archive(tmp_path, database_url)
    url = "http://archive.example.org/col/x/doc/a.pdf"
    nodes = [stats.open_store(tmp_path / n, database_url) for n in ("a", "b")]
    heads = [keys.issue([url]) for _ in range(20)]
    outcomes: list[str] = []
    lock = threading.Lock()

    def acknowledge(store):
        for key in heads:
            got = store.acknowledge(stats.Acknowledgment(key, url, "Data", "Original", "x"), keys)
            with lock:
                outcomes.append(got)

    threads = [threading.Thread(target=acknowledge, args=(s,)) for s in nodes * 4]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert outcomes.count("counted") == len(heads)
    assert outcomes.count("replay") == len(heads) * 7
    assert nodes[1].report()["total"] == len(heads)


def test_a_database_that_does_not_answer_is_a_problem_not_a_crash(settings, tmp_path, caplog):
    dead = "postgresql://nobody@127.0.0.1:1/none"
    client = node(settings, tmp_path, "a", dead)
    got = answer(client, RELATORIO)  # answered, signed with a key of this process only
    ack(client, got)
    health = client.get("/health", status=503).json
    text = " ".join(health["problems"])
    assert "URL-key secret" in text and "acknowledgments are not counted" in text
    assert "nobody@127.0.0.1:1" not in text  # where is for the logs
    with pytest.raises(stats.StatsError, match="cannot read database"):
        stats.open_store(tmp_path, dead).report()


# --- minting across nodes ---

MINTER = """
import sys, time
from archive_service.deposit.mint import mint
state_dir, database = sys.argv[1], sys.argv[2]
start, seconds = float(sys.argv[3]), float(sys.argv[4])
time.sleep(max(0.0, start - time.time()))
while time.time() < start + seconds:
    m = mint("mint.example.org", 8080, "192.0.2.7", "both", state_dir=state_dir,
             granularity="0.01", database=database)
    print(m.rep, m.ibip, flush=True)
"""
MINT_SECONDS = 10


@pytest.mark.process
@pytest.mark.slow
def test_two_nodes_minting_at_once_never_repeat_a_label(tmp_path, database_url):
    """Two processes with their own state_dir (two nodes) mint for one archiveaddress for
    MINT_SECONDS: every label is distinct, and each node minted."""
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    }
    start = time.time() + 1.5  # both interpreters are up by then, so they really compete
    nodes = [
        subprocess.Popen(
            [
                sys.executable,
                "-c",
                MINTER,
                str(tmp_path / n),
                database_url,
                str(start),
                str(MINT_SECONDS),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        for n in ("a", "b")
    ]
    outputs = []
    for process in nodes:
        out, err = process.communicate(timeout=MINT_SECONDS + 60)
        assert process.returncode == 0, err
        outputs.append(out.split())
    assert all(len(out) > 20 for out in outputs), [len(o) for o in outputs]
    labels = [label for out in outputs for label in out]
    print(f"{len(labels)} labels ({[len(o) for o in outputs]}) in {MINT_SECONDS} s")
    assert len(labels) == len(set(labels)), "a label was minted twice"


def test_a_node_goes_on_after_what_it_minted_before_sharing(tmp_path, database_url):
    clock = [Decimal("1287588115.2")]

    def sleep(seconds):
        clock[0] += Decimal(str(seconds))

    before = mint.mint(
        "mint.example.org", 80, form="rep", state_dir=tmp_path, now=lambda: clock[0], sleep=sleep
    )
    shared = mint.mint(
        "mint.example.org",
        80,
        form="rep",
        state_dir=tmp_path,
        now=lambda: clock[0],
        sleep=sleep,
        database=database_url,
    )
    assert shared.time > before.time and shared.rep != before.rep
    with psycopg.connect(database_url) as conn:
        assert conn.execute("SELECT prefix, last FROM mint_last").fetchall() == [
            ("rep:example.org/mint", shared.time)
        ]


# --- two real `serve` nodes ---


@pytest.mark.process
def test_two_serve_nodes_on_one_collection_and_one_database(tmp_path, collection, database_url):
    """urlRequest on node A, its acknowledgment on node B counted once, the replay on A
    refused, and `stats` on either node shows the same total."""
    shared = f"127.0.0.1:{free_port()}"  # the address both nodes answer for (a balancer's)
    nodes = []
    try:
        for name in ("a", "b"):
            nodes.append(
                Serve(
                    tmp_path,
                    "--collection",
                    str(collection),
                    "--state-dir",
                    str(tmp_path / name),
                    "--no-announce",
                    "--workers",
                    "2",
                    "--database",
                    database_url,
                    "--archiveaddress",
                    shared,
                )
            )
        for serve in nodes:
            serve.wait_answering(timeout=60)
        a, b = nodes
        got = dict(pairs.parse(a.get(urlencode(url_request(RELATORIO)))))
        assert b.get(urlencode(acknowledgment(got))) == NOTICE
        assert a.get(urlencode(acknowledgment(got))) == NOTICE  # the replay, on the issuing node
        for name in ("a", "b"):
            done = run_command(
                [
                    "stats",
                    "--state-dir",
                    str(tmp_path / name),
                    "--database",
                    database_url,
                    "--format",
                    "json",
                ]
            )
            assert done.returncode == 0, done.stderr
            report = json.loads(done.stdout)
            assert (report["total"], report["rejected_by_reason"]) == (1, {"replay": 1}), name
        for serve in nodes:
            assert serve.stop() == 0
    finally:
        for serve in nodes:
            serve.kill()


def test_mint_and_deposit_commands_take_the_shared_minting_state(
    tmp_path, collection, database_url, capsys
):
    common = ["--archiveaddress", "mint.example.org", "--database", database_url]
    labels = []
    for node in ("a", "b"):
        assert cli.main(["mint", "--state-dir", str(tmp_path / node), *common]) == 0
        labels.append(capsys.readouterr().out)
    assert labels[0].startswith("rep example.org/mint/") and labels[0] != labels[1]
    source = tmp_path / "paper.txt"
    source.write_text("a paper\n")
    argv = ["deposit", str(source), "--collection", str(collection), "--state-dir"]
    assert cli.main([*argv, str(tmp_path / "c"), *common]) == 0
    capsys.readouterr()
    with psycopg.connect(database_url) as conn:
        assert conn.execute("SELECT prefix FROM mint_last").fetchall() == [
            ("rep:example.org/mint",)
        ]
