"""Statistics that cannot be inflated (issue 15) and acknowledgments accepted as the seed sends
them (issue 16): a key counts at most once whatever its spelling, carries exactly the tags it
was issued with, is counted under the item, content type and state the Archive's own index
gives its URL, and a flood of refused variants leaves the store small. A store that cannot
write says so, once, and keeps saying so where a health check can read it."""

from __future__ import annotations

import hashlib
import hmac
import logging
import os
import shutil
import sqlite3
import time
from pathlib import Path

import pytest

from archive_service.protocol import pairs, urlkeys
from archive_service.protocol.urlkeys import UrlKeys
from archive_service.stores import stats
from archive_service.web import create_app
from isolation import in_child
from support import ADDRESS, SERVICE, Client

NOTICE = "notice {acknowledgment received}"
RELATORIO = "8JMKD3MGP7W/3EPGUE5"
RELATORIO_DIR = "sid.inpe.br/mtc-m19/2013/09.04.12.27.57"
CCSDS = "sid.inpe.br/mtc-m18@80/2009/07.21.13.23"
COPY = "dpi.inpe.br/banon/2003/12.10.19.30"  # state: Copy
INLINE_DC = "iconet.com.br/banon/2012/03.05.08.15"  # metadata served by the service itself
TAG = urlkeys.TAG_DIGITS

# The query of Example 6.9 of the seed, verbatim (sent there to the service
# /sid.inpe.br/mtc-m19@80/2009/08.21.17.02): it has no `state` pair although Table 6.11 marks
# it obligatory.
EXAMPLE_6_9_QUERY = (
    "servicesubject=acknowledgment&clientinformation.ipaddress=150.163.2.175&contenttype=Data&"
    "ibi=rep%20sid.inpe.br/mtc-m19/2013/09.04.12.27.57%20ibip%208JMKD3MGP7W/3EPGUE5&"
    "url=http://mtc-m16d.sid.inpe.br/col/sid.inpe.br/mtc-m19/2013/09.04.12.27.57/doc/"
    "Relat%f3rio%20Final.pdf&url.persistent=http://mtc-m16d.sid.inpe.br:80/8JMKD3MGP7W/3EPGUE5&"
    "urlkey=1424636122-5331490054869684"
)


def answer(client: Client, ibi: str, **extra) -> dict[str, str]:
    return dict(pairs.parse(client.url_request(ibi, **extra).text))


def ack(client: Client, url: str, urlkey: str, **override) -> None:
    params = {
        "servicesubject": "acknowledgment",
        "clientinformation.ipaddress": "150.163.2.175",
        "contenttype": "Data",
        "state": "Original",
        "url": url,
        "url.persistent": "http://urlib.net/" + RELATORIO,
        "urlkey": urlkey,
    }
    params.update(override)
    params = {k: v for k, v in params.items() if v is not None}
    assert client.service(**params).text == NOTICE, "the answer is the notice either way"


def report(settings) -> dict:
    return stats.Store(settings["state_dir"]).report()


@pytest.fixture
def app_client(settings) -> Client:
    return Client(create_app(settings), "")


# ------------------------------------------------------------- one key, counted once


def test_appended_digits_or_a_doubled_tag_do_not_count_again(app_client, settings):
    got = answer(app_client, RELATORIO)
    key, url = got["urlkey"], got["url"]
    ack(app_client, url, key)
    last = key[-TAG:]
    for variant in (
        key + "12345678901234567890",
        key + last,
        key + last * 5,
        key + "0" * TAG * 50,
        key[:-TAG] + last + last,
    ):
        ack(app_client, url, variant)
    got = report(settings)
    assert got["total"] == 1, "one key issued, one count, whatever is appended to it"
    assert got["rejected"] == 5


def test_a_key_carries_exactly_the_tags_it_was_issued_with():
    keys = UrlKeys.ephemeral()
    urls = [f"http://a.example/col/x/doc/{lang}.pdf" for lang in ("en", "pt")]
    key = keys.issue(urls)
    assert all(keys.verify(key, u).ok for u in urls)
    head, tags = key.split("-")
    tail = tags[-TAG:]
    assert keys.verify(key + "12345678901234567890", urls[0]).reason == "forged"
    assert keys.verify(key + tail, urls[0]).reason == "forged"
    assert keys.verify(head + "-" + tags[TAG:], urls[1]).reason in ("forged", "malformed")
    assert keys.verify(head + "-" + tags[:TAG] + tags, urls[0]).reason == "forged"


def test_one_answer_counts_once_even_when_it_carries_several_urls(app_client, settings):
    got = answer(app_client, CCSDS, verblist="GetTranslation")
    ack(app_client, got["url.translation(en)"], got["urlkey"])
    ack(app_client, got["url.translation(pt)"], got["urlkey"])
    assert (report(settings)["total"], report(settings)["rejected_by_reason"]) == (1, {"replay": 1})


# ------------------------------------------------- what is counted comes from the index


@pytest.mark.parametrize(
    "respell",
    [
        lambda u: u.replace("/col/sid.inpe.br/", "/col/%73id.inpe.br/"),
        lambda u: u.replace("/col/sid.inpe.br/mtc-m19/", "/col/sid.inpe.br%2Fmtc-m19%2F"),
        lambda u: u.replace("/doc/", "/%64oc/"),
        lambda u: u.replace("%C3%B3", "%c3%b3"),
        lambda u: u.replace(f"http://{ADDRESS}/", f"HTTP://{ADDRESS.upper()}:80/"),
    ],
    ids=["%73", "%2F", "%64oc", "lowercase-hex", "host-case-and-port"],
)
def test_a_url_spelled_differently_counts_under_the_item_it_names(app_client, settings, respell):
    got = answer(app_client, RELATORIO)
    spelled = respell(got["url"])
    assert spelled != got["url"]
    ack(
        app_client, spelled, got["urlkey"], ibi="rep " + CCSDS, contenttype="Metadata", state="Copy"
    )
    assert report(settings)["items"] == [
        {
            "ibi": RELATORIO_DIR,
            "count": 1,
            "by_contenttype": {"Data": 1},
            "by_state": {"Original": 1},
        }
    ]


def test_claimed_ibi_contenttype_and_state_are_ignored(app_client, settings):
    copy = answer(app_client, COPY)
    ack(
        app_client,
        copy["url"],
        copy["urlkey"],
        ibi="rep " + CCSDS,
        state="Original",
        contenttype="Metadata",
    )
    meta = answer(app_client, RELATORIO, verblist="GetMetadata")
    ack(app_client, meta["url.metadata"], meta["urlkey"], ibi="rep " + CCSDS, contenttype="Data")
    inline = answer(app_client, INLINE_DC, verblist="GetMetadata")
    ack(app_client, inline["url.metadata"], inline["urlkey"], contenttype="Data", state="Copy")
    items = {i["ibi"]: i for i in report(settings)["items"]}
    assert items == {
        COPY: {"ibi": COPY, "count": 1, "by_contenttype": {"Data": 1}, "by_state": {"Copy": 1}},
        "sid.inpe.br/mtc-m19/2013/09.04.12.27.58": {  # the metadata item of RELATORIO
            "ibi": "sid.inpe.br/mtc-m19/2013/09.04.12.27.58",
            "count": 1,
            "by_contenttype": {"Metadata": 1},
            "by_state": {"Original": 1},
        },
        INLINE_DC: {
            "ibi": INLINE_DC,
            "count": 1,
            "by_contenttype": {"Metadata": 1},
            "by_state": {"Original": 1},
        },
    }


def test_a_url_of_an_item_no_longer_held_is_not_counted_under_the_claimed_ibi(settings, collection):
    first = Client(create_app(settings), "")
    got = answer(first, RELATORIO)
    shutil.rmtree(collection / RELATORIO_DIR)
    restarted = Client(create_app(settings), "")  # same secret: the key still verifies
    assert restarted.url_request(RELATORIO).text == ""
    ack(restarted, got["url"], got["urlkey"], ibi="rep " + CCSDS)
    got = report(settings)
    assert (got["total"], got["items"], got["rejected_by_reason"]) == (0, [], {"unknown": 1})


# ------------------------------------------- acknowledgments as the seed's resolver sends


def test_example_6_9_verbatim_is_accepted_and_counted(settings, collection):
    """The seed's Archive had the file under a Latin-1 name (`%f3`); so does this one. Only
    the host and the key, which this Archive must have issued, are replaced."""
    doc = collection / RELATORIO_DIR / "doc"
    os.rename(doc / "Relatório Final.pdf", os.fsencode(doc) + b"/Relat\xf3rio Final.pdf")
    sidecar = collection / RELATORIO_DIR / "item.yaml"
    sidecar.write_text(
        "".join(
            line for line in sidecar.read_text().splitlines(True) if not line.startswith("target:")
        )
    )
    client = Client(create_app(settings), "")
    got = answer(client, RELATORIO)
    assert got["url"] == f"http://{ADDRESS}/col/{RELATORIO_DIR}/doc/Relat%F3rio%20Final.pdf"
    query = EXAMPLE_6_9_QUERY.replace("mtc-m16d.sid.inpe.br", ADDRESS).replace(
        "1424636122-5331490054869684", got["urlkey"]
    )
    assert "state=" not in query
    response = client.test.get(f"/{SERVICE}?{query}")
    assert (response.status_int, response.text) == (200, NOTICE)
    assert report(settings)["items"] == [
        {
            "ibi": RELATORIO_DIR,
            "count": 1,
            "by_contenttype": {"Data": 1},
            "by_state": {"Original": 1},
        }
    ]


@pytest.mark.parametrize("missing", ["state", "ibi"])
def test_an_acknowledgment_without_an_optional_pair_is_counted(app_client, settings, missing):
    got = answer(app_client, COPY)
    ack(app_client, got["url"], got["urlkey"], **{missing: None})
    assert report(settings)["by_state"] == {"Copy": 1}


@pytest.mark.parametrize(
    "override, reason",
    [
        ({"urlkey": "12345"}, "urlkey must be digits"),
        ({"clientinformation.ipaddress": "1.2.3.4,5.6.7.8"}, "IP addresses"),
        ({"state": "Deleted"}, "state must be Original or Copy"),
        ({"url": None}, "acknowledgment needs url"),
        ({"urlkey": None}, "acknowledgment needs urlkey"),
    ],
)
def test_what_is_truly_malformed_stays_400(app_client, settings, override, reason):
    got = answer(app_client, COPY)
    params = {
        "servicesubject": "acknowledgment",
        "clientinformation.ipaddress": "1.2.3.4",
        "contenttype": "Data",
        "url": got["url"],
        "url.persistent": "http://urlib.net/x",
        "urlkey": got["urlkey"],
        **override,
    }
    response = app_client.service(status=400, **{k: v for k, v in params.items() if v is not None})
    assert response.text.startswith("error {") and reason in response.text
    assert report(settings)["total"] == 0


# ------------------------------------------------------------------ bounded storage


def _sizes(state_dir: str | Path) -> tuple[int, int]:
    path = Path(state_dir) / stats.DB_FILE
    wal = path.with_name(path.name + "-wal")
    return path.stat().st_size, wal.stat().st_size if wal.exists() else 0


FLOOD = 20_000


def test_a_flood_of_refused_variants_leaves_the_store_small_and_the_log_quiet(tmp_path, caplog):
    keys = UrlKeys.ephemeral()
    store = stats.Store(tmp_path)
    url = "http://a.example/col/a.example/x/2024/01.01.00.00/doc/a.pdf"
    key = keys.issue([url])
    item = dict(ibi="a.example/x/2024/01.01.00.00", contenttype="Data", state="Original")
    assert store.acknowledge(stats.Acknowledgment(key, url, **item), keys) == "counted"
    with caplog.at_level(logging.INFO, logger="archive_service.web.stats"):
        for i in range(FLOOD):
            variant = key + f"{i:0{TAG}d}" if i % 2 else key[:-TAG] + f"{i:0{TAG}d}" + key[-TAG:]
            store.acknowledge(stats.Acknowledgment(variant, url, **item), keys)
    during = sum(_sizes(tmp_path))
    store.close()
    main, wal = _sizes(tmp_path)
    print(
        f"\nstats.sqlite3 after 1 genuine and {FLOOD} refused variants: {main} bytes "
        f"(with its WAL before the last connection closed: {during} bytes)"
    )
    got = stats.Store(tmp_path).report()
    assert (got["total"], got["rejected"]) == (1, FLOOD)
    assert main <= 10 * 4096, "refusals are aggregated, not stored one row each"  # a page a table
    assert during <= 8 * 2**20
    refusal_lines = [r for r in caplog.records if r.levelno >= logging.INFO]
    assert len(refusal_lines) <= 3, "refusals are summed up in the log, not one line each"


def test_genuine_acknowledgments_cost_a_few_bytes_each_and_expire(tmp_path):
    clock = [2_000_000_000.0]
    keys = UrlKeys(b"k" * 32, clock=lambda: clock[0])
    # Each counted acknowledgment is also a use COUNTER counts, kept stats_retention_days.
    store = stats.Store(tmp_path, clock=lambda: clock[0], retention_days=1)
    url = "http://a.example/col/a.example/x/2024/01.01.00.00/doc/a.pdf"
    item = dict(ibi="a.example/x/2024/01.01.00.00", contenttype="Data", state="Original")
    for _ in range(FLOOD):
        assert (
            store.acknowledge(stats.Acknowledgment(keys.issue([url]), url, **item), keys)
            == "counted"
        )
    main, wal = _sizes(tmp_path)
    with sqlite3.connect(store.path) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    main, _ = _sizes(tmp_path)
    per_ack = main / FLOOD
    print(
        f"\n{FLOOD} genuine acknowledgments: stats.sqlite3 {main} bytes, {per_ack:.1f} bytes each"
    )
    # The head (about 18 bytes) and the use (time, item, kind, a 24-character user hash).
    assert per_ack < 150
    clock[0] += 86400 + urlkeys.LIFETIME + stats.PURGE_EVERY + urlkeys.CLOCK_SKEW + 1
    assert (
        store.acknowledge(stats.Acknowledgment(keys.issue([url]), url, **item), keys) == "counted"
    )
    with sqlite3.connect(store.path) as conn:
        remembered = conn.execute(f"SELECT count(*) FROM {stats.SEEN_TABLE}").fetchone()[0]
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    store.close()
    assert remembered == 1, "keys past their lifetime are forgotten, uses past the retention"
    after, _ = _sizes(tmp_path)
    print(f"after the purge: {after} bytes")
    assert after <= 10 * 4096, "and the file gives their pages back"
    assert stats.Store(tmp_path).report()["total"] == FLOOD + 1


# ------------------------------------------------------------- a store that cannot write


def test_a_store_that_cannot_write_says_so_once_and_reports_it(tmp_path, caplog):
    keys = UrlKeys.ephemeral()
    (tmp_path / stats.DB_FILE).mkdir()  # a directory where the database should be
    store = stats.Store(tmp_path)
    url = "http://a.example/col/a.example/x/2024/01.01.00.00/doc/a.pdf"
    item = dict(ibi="a.example/x/2024/01.01.00.00", contenttype="Data", state="Original")
    assert store.problem is None, "nothing known to be wrong before the first write"
    with caplog.at_level(logging.INFO, logger="archive_service.web.stats"):
        outcomes = [
            store.acknowledge(stats.Acknowledgment(keys.issue([url]), url, **item), keys)
            for _ in range(5)
        ]
    assert outcomes == ["unrecorded"] * 5
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert len(errors) == 1, "loud once, not once per request"
    message = errors[0].getMessage()
    assert str(store.path) in message and "not counted" in message
    assert store.problem and str(store.path) in store.problem and "\n" not in store.problem
    (tmp_path / stats.DB_FILE).rmdir()
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="archive_service.web.stats"):
        assert (
            store.acknowledge(stats.Acknowledgment(keys.issue([url]), url, **item), keys)
            == "counted"
        )
    assert store.problem is None
    assert "5 acknowledgments were not counted" in caplog.text


@pytest.mark.process
def test_a_full_state_disk_is_reported_by_the_app(settings, tmp_path):
    """A file-size limit makes every write that grows a file fail (EFBIG), as a full disk does."""
    client = Client(create_app(settings), "")
    got = answer(client, RELATORIO)
    ack(client, got["url"], got["urlkey"])
    pending = [answer(client, RELATORIO) for _ in range(200)]
    limit = max(f.stat().st_size for f in Path(settings["state_dir"]).iterdir())

    def child():
        full = Client(create_app(settings), "")
        problems = []
        for answered in pending:
            ack(full, answered["url"], answered["urlkey"])
            problems.append(full.app.extensions["stats"].problem)
        return problems

    problems, log = in_child(child, max_file_size=limit)
    reported = [p for p in problems if p]
    assert reported, "the limit must have bitten, and the store must say so"
    assert stats.DB_FILE in reported[0] and "not counted" in reported[0]
    assert len([line for line in log if line.startswith("ERROR") and "statistics" in line]) == 1


def test_keys_of_the_format_before_the_seal_are_refused():
    """Keys issued before the upgrade (head of 18 digits, tags, no seal) lived for the seconds
    between an answer and its acknowledgment: they are refused, never counted."""
    secret = b"s" * 32
    keys = UrlKeys(secret)
    url = "http://a.example/col/x/doc/a.pdf"
    head = f"{int(time.time()):010d}12345678"

    def old_tag(u: str) -> str:
        mac = hmac.digest(
            secret, b"urlkey/1\0" + head.encode() + b"\0" + u.encode(), hashlib.sha256
        )
        return f"{int.from_bytes(mac, 'big') % 10**TAG:0{TAG}d}"

    assert not keys.verify(f"{head}-{old_tag(url)}", url).ok
    assert not keys.verify(f"{head}-{old_tag(url)}{old_tag(url + 'x')}", url).ok


def test_a_store_of_the_format_before_keeps_its_counts_and_forgets_whole_keys(tmp_path):
    with sqlite3.connect(tmp_path / stats.DB_FILE) as conn:
        conn.executescript("""
            CREATE TABLE seen (urlkey TEXT PRIMARY KEY, issued INTEGER NOT NULL) WITHOUT ROWID;
            CREATE INDEX seen_by_issue ON seen (issued);
            CREATE TABLE counts (day TEXT NOT NULL, ibi TEXT NOT NULL, contenttype TEXT NOT NULL,
                state TEXT NOT NULL, n INTEGER NOT NULL,
                PRIMARY KEY (day, ibi, contenttype, state)) WITHOUT ROWID;
            CREATE TABLE rejected (day TEXT NOT NULL, reason TEXT NOT NULL, n INTEGER NOT NULL,
                PRIMARY KEY (day, reason)) WITHOUT ROWID;
            INSERT INTO seen VALUES ('142724488912345678-12345678901234567890', 1427244889);
            INSERT INTO counts
                VALUES ('2024-01-01', 'a.example/x/2024/01.01.00.00', 'Data', 'Original', 7);
        """)
    conn.close()
    keys = UrlKeys.ephemeral()
    url = "http://a.example/col/a.example/x/2024/01.01.00.00/doc/a.pdf"
    store = stats.Store(tmp_path)
    assert (
        store.acknowledge(
            stats.Acknowledgment(
                keys.issue([url]), url, "Data", "Original", "a.example/x/2024/01.01.00.00"
            ),
            keys,
        )
        == "counted"
    )
    store.close()
    with sqlite3.connect(tmp_path / stats.DB_FILE) as conn:
        tables = {name for (name,) in conn.execute("SELECT name FROM sqlite_master")}
    conn.close()
    assert "seen" not in tables and stats.SEEN_TABLE in tables
    assert stats.Store(tmp_path).report()["total"] == 8


def test_the_services_own_item_is_counted_under_the_service(app_client, settings):
    """The Archive's service is an identified item (§7.1) with no directory: its URL is the
    service's page, and an acknowledgment of it counts under the service's IBI."""
    got = answer(app_client, SERVICE)
    assert got["url"].endswith(f"/{SERVICE}/about")
    ack(app_client, got["url"], got["urlkey"], ibi="rep " + CCSDS)
    assert report(settings)["items"] == [
        {"ibi": SERVICE, "count": 1, "by_contenttype": {"Data": 1}, "by_state": {"Original": 1}}
    ]
