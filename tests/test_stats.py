"""Access statistics from acknowledgments: counted when vouched for, once, and persisted."""

from __future__ import annotations

import csv
import io
import json
import logging
import multiprocessing
import sqlite3
from pathlib import Path
from urllib.parse import urlencode

import pytest

from archive_service import cli, deposit
from archive_service.protocol import pairs
from archive_service.stores import stats
from archive_service.web import create_app
from support import SERVICE, Client

NOTICE = "notice {acknowledgment received}"
RELATORIO = "8JMKD3MGP7W/3EPGUE5"  # sid.inpe.br/mtc-m19/2013/09.04.12.27.57
OAIS = "8JMKD3MGP8W/35MMLL8"  # sid.inpe.br/mtc-m18@80/2009/07.21.14.43
CCSDS = "sid.inpe.br/mtc-m18@80/2009/07.21.13.23"  # translations en (itself) and pt


def answer(client: Client, ibi: str, **extra) -> dict[str, str]:
    return dict(pairs.parse(client.url_request(ibi, **extra).text))


def ack_params(got: dict[str, str], qualifier: str = "", **override) -> dict[str, str]:
    params = {
        "servicesubject": "acknowledgment",
        "clientinformation.ipaddress": "150.163.2.175",
        "contenttype": got["contenttype" + qualifier],
        "ibi": got["ibi"].strip("{}"),
        "state": got["state" + qualifier],
        "url": got["url" + qualifier],
        "url.persistent": "http://urlib.net/" + RELATORIO,
        "urlkey": got["urlkey"],
    }
    params.update(override)
    return params


def acknowledge(client: Client, params: dict[str, str]) -> None:
    assert client.service(**params).text == NOTICE, "the answer is the notice either way"


def report(state_dir: str | Path, **kwargs) -> dict:
    return stats.Store(state_dir).report(**kwargs)


@pytest.fixture
def app_client(settings) -> Client:
    return Client(create_app(settings), "")


def test_a_valid_acknowledgment_counts_once_and_replays_are_refused(app_client, settings, caplog):
    got = answer(app_client, RELATORIO)
    with caplog.at_level(logging.INFO, logger="archive_service.web.stats"):
        for _ in range(3):
            acknowledge(app_client, ack_params(got))
    got = report(settings["state_dir"])
    assert (got["total"], got["rejected"]) == (1, 2)
    assert got["rejected_by_reason"] == {"replay": 2}
    assert got["items"] == [
        {
            "ibi": "sid.inpe.br/mtc-m19/2013/09.04.12.27.57",
            "count": 1,
            "by_contenttype": {"Data": 1},
            "by_state": {"Original": 1},
        }
    ]
    assert caplog.text.count("acknowledgment refused (replay)") == 1, "later ones summed up"
    assert ack_params(answer(app_client, RELATORIO))["urlkey"].split("-")[0] not in caplog.text


def test_keys_made_up_or_borrowed_are_refused(app_client, settings):
    got = answer(app_client, RELATORIO)
    other = answer(app_client, OAIS)
    acknowledge(app_client, ack_params(got, urlkey="1427244889-5349022633744855"))  # the seed's
    acknowledge(app_client, ack_params(got, urlkey=other["urlkey"]))  # a key for another URL
    acknowledge(app_client, ack_params(got, url=other["url"]))  # a URL the key is not for
    forged = got["urlkey"][:-1] + str((int(got["urlkey"][-1]) + 1) % 10)
    acknowledge(app_client, ack_params(got, urlkey=forged))
    acknowledge(app_client, ack_params(got, urlkey="1000000000" + got["urlkey"][10:]))  # 1970
    got_report = report(settings["state_dir"])
    assert got_report["total"] == 0
    assert got_report["rejected_by_reason"] == {"expired": 1, "forged": 3, "malformed": 1}


def test_any_url_of_a_get_translation_answer_verifies(app_client, settings):
    got = answer(app_client, CCSDS, verblist="GetTranslation")
    assert {"url.translation(en)", "url.translation(pt)"} <= set(got)
    acknowledge(app_client, ack_params(got, ".translation(pt)"))
    again = answer(app_client, CCSDS, verblist="GetTranslation")
    acknowledge(app_client, ack_params(again, ".translation(en)"))
    counted = report(settings["state_dir"])
    assert counted["total"] == 2 and counted["rejected"] == 0
    assert {i["ibi"] for i in counted["items"]} == {
        CCSDS,
        "sid.inpe.br/mtc-m18@80/2009/08.25.19.43",
    }


def test_the_key_vouches_only_for_urls_the_filtered_answer_gives(app_client, settings):
    """A GetMetadata answer drops the item's own url: its key must not vouch for it."""
    plain = answer(app_client, CCSDS)
    meta = answer(app_client, CCSDS, verblist="GetMetadata")
    assert "url" not in meta and "url.metadata" in meta
    acknowledge(app_client, ack_params(meta, ".metadata", url=plain["url"], contenttype="Data"))
    acknowledge(app_client, ack_params(meta, ".metadata"))
    assert report(settings["state_dir"])["rejected_by_reason"] == {"forged": 1}
    assert report(settings["state_dir"])["total"] == 1


def test_counts_go_to_the_item_the_url_names_not_the_one_claimed(app_client, settings):
    got = answer(app_client, RELATORIO)
    acknowledge(app_client, ack_params(got, ibi="rep " + CCSDS))
    assert [i["ibi"] for i in report(settings["state_dir"])["items"]] == [
        "sid.inpe.br/mtc-m19/2013/09.04.12.27.57"
    ]


def test_an_item_deleted_since_its_url_was_acknowledged_counts_no_more(app_client, settings):
    """What a URL names is kept per worker while the index stays (issue 35); the index's
    change (a tombstone) is seen by the next acknowledgment of the same URL."""
    first, second = answer(app_client, RELATORIO), answer(app_client, RELATORIO)
    acknowledge(app_client, ack_params(first))
    deposit.delete(settings, RELATORIO)
    acknowledge(app_client, ack_params(second))
    got = report(settings["state_dir"])
    assert (got["total"], got["rejected_by_reason"]) == (1, {"unknown": 1})


def test_the_seeds_raw_url_in_the_query_counts(app_client, settings, collection):
    """Example 6.9 sends the URL unescaped; its %f3 and %20 are decoded by the query parser."""
    got = answer(app_client, RELATORIO)
    params = ack_params(got)
    query = urlencode({k: v for k, v in params.items() if k != "url"}) + "&url=" + params["url"]
    assert app_client.test.get(f"/{SERVICE}?{query}").text == NOTICE
    assert report(settings["state_dir"])["total"] == 1


def test_counts_survive_a_restart_and_keys_stay_valid_across_it(settings):
    first = Client(create_app(settings), "")
    early, late = answer(first, RELATORIO), answer(first, OAIS)
    acknowledge(first, ack_params(early))
    second = Client(create_app(settings), "")  # a restart: same state_dir, new process state
    acknowledge(second, ack_params(late))
    acknowledge(second, ack_params(early))
    got = report(settings["state_dir"])
    assert (got["total"], got["rejected"]) == (2, 1)


def _acknowledge_in_worker(settings, params_list, barrier) -> None:
    client = Client(create_app(settings), "")
    barrier.wait()
    for params in params_list:
        acknowledge(client, params)


@pytest.mark.process
def test_workers_count_concurrently_without_loss_or_double_counting(settings):
    """Four processes send the same 40 acknowledgments at once: 40 counted, 120 replays."""
    client = Client(create_app(settings), "")
    acks = [ack_params(answer(client, ibi)) for ibi in (RELATORIO, OAIS) * 20]
    context = multiprocessing.get_context("fork")
    barrier = context.Barrier(4)
    workers = [
        context.Process(target=_acknowledge_in_worker, args=(settings, acks, barrier))
        for _ in range(4)
    ]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(30)
        assert worker.exitcode == 0
    got = report(settings["state_dir"])
    assert (got["total"], got["rejected"]) == (40, 120)
    assert sum(i["count"] for i in got["items"]) == 40


def test_the_store_is_wal_sqlite_in_the_state_dir(app_client, settings):
    acknowledge(app_client, ack_params(answer(app_client, RELATORIO)))
    path = Path(settings["state_dir"]) / stats.DB_FILE
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone() == ("wal",)
        assert conn.execute(f"SELECT count(*) FROM {stats.SEEN_TABLE}").fetchone() == (1,)
    conn.close()


def test_seen_keys_are_purged_once_expired(settings):
    clock = [2_000_000_000.0]
    store = stats.Store(settings["state_dir"], clock=lambda: clock[0])
    from archive_service.protocol.urlkeys import LIFETIME, UrlKeys

    keys = UrlKeys(b"k" * 32, clock=lambda: clock[0])
    url = "http://x.example/col/a"
    for _ in range(3):
        key = keys.issue([url])
        assert (
            store.acknowledge(stats.Acknowledgment(key, url, "Data", "Original", "a"), keys)
            == "counted"
        )
    clock[0] += LIFETIME + 4000
    key = keys.issue([url])
    store.acknowledge(stats.Acknowledgment(key, url, "Data", "Original", "a"), keys)
    with sqlite3.connect(store.path) as conn:
        assert conn.execute(f"SELECT count(*) FROM {stats.SEEN_TABLE}").fetchone() == (1,)
    conn.close()
    store.close()
    assert store.report()["total"] == 4


# -------------------------------------------------------------------- archive-service stats


@pytest.fixture
def counted(settings) -> str:
    """A state dir holding 3 counted acknowledgments (2 days) and 1 refused."""
    store = stats.Store(settings["state_dir"])
    conn = store._connection()
    conn.executemany(
        "INSERT INTO counts VALUES (?, ?, ?, ?, ?)",
        [
            ("2024-01-01", "a.example/x/2024/01.01.00.00", "Data", "Original", 1),
            ("2024-01-02", "a.example/x/2024/01.01.00.00", "Data", "Original", 1),
            ("2024-01-02", "LK47B6W/362SFKH", "Metadata", "Copy", 1),
        ],
    )
    conn.execute("INSERT INTO rejected VALUES ('2024-01-01', 'forged', 1)")
    store.close()
    return settings["state_dir"]


def run_stats(capsys, *argv: str) -> str:
    assert cli.main(["stats", *argv]) == 0
    return capsys.readouterr().out


def test_stats_json_contract(counted, capsys):
    got = json.loads(run_stats(capsys, "--state-dir", counted, "--format", "json"))
    assert (got["total"], got["rejected"]) == (3, 1)
    assert got["by_contenttype"] == {"Data": 2, "Metadata": 1}
    assert got["by_state"] == {"Copy": 1, "Original": 2}
    assert got["days"] == [
        {"day": "2024-01-01", "count": 1, "rejected": 1},
        {"day": "2024-01-02", "count": 2, "rejected": 0},
    ]
    assert got["items"][0] == {
        "ibi": "a.example/x/2024/01.01.00.00",
        "count": 2,
        "by_contenttype": {"Data": 2},
        "by_state": {"Original": 2},
    }


def test_stats_since_and_top(counted, capsys):
    got = json.loads(
        run_stats(
            capsys,
            "--state-dir",
            counted,
            "--format",
            "json",
            "--since",
            "2024-01-02",
            "--top",
            "1",
        )
    )
    assert (got["total"], got["rejected"], got["since"]) == (2, 0, "2024-01-02")
    assert len(got["items"]) == 1


def test_stats_csv_and_table(counted, capsys):
    rows = list(
        csv.reader(io.StringIO(run_stats(capsys, "--state-dir", counted, "--format", "csv")))
    )
    assert rows[0] == ["section", "key", "count"]
    assert ["total", "", "3"] in rows and ["item", "LK47B6W/362SFKH", "1"] in rows
    text = run_stats(capsys, "--state-dir", counted)
    assert "acknowledgments counted: 3" in text and "refused: 1 (forged 1)" in text
    assert "a.example/x/2024/01.01.00.00" in text


def test_stats_reads_state_dir_from_the_config_file(counted, tmp_path, capsys):
    config = tmp_path / "archive.yaml"
    config.write_text(f"state_dir: {counted}\n")
    got = json.loads(run_stats(capsys, "--config", str(config), "--format", "json"))
    assert got["total"] == 3


def test_stats_of_an_archive_never_acknowledged_is_zero_and_creates_nothing(tmp_path, capsys):
    got = json.loads(run_stats(capsys, "--state-dir", str(tmp_path / "none"), "--format", "json"))
    assert (got["total"], got["rejected"]) == (0, 0)
    assert not (tmp_path / "none").exists()


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--since", "yesterday"], "is not a date"),
        (["--top", "-3"], "is not a whole number"),
        (["--format", "xml"], "invalid choice"),
    ],
)
def test_stats_bad_arguments(argv, message, capsys):
    with pytest.raises(SystemExit) as exc:
        cli.main(["stats", *argv])
    assert exc.value.code == 2 and message in capsys.readouterr().err


def test_stats_of_a_file_that_is_not_a_database(tmp_path, capsys):
    (tmp_path / stats.DB_FILE).write_text("garbage " * 100)
    assert cli.main(["stats", "--state-dir", str(tmp_path)]) == 2
    assert "cannot read" in capsys.readouterr().err
