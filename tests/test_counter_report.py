"""`archive-service stats --report ir`: the COUNTER R5.1 Item Report, figures computed by hand.

A fixture of downloads, pages and acknowledgments over two months, with robots (user agents
from the COUNTER list), double-clicks (two within 30 s, two 31 s apart) and sessions (the same
user in two hours), recorded through the one statistics interface in SQLite and in PostgreSQL.
"""

from __future__ import annotations

import csv
import io
import json
import re
from datetime import UTC, datetime

import pytest

from archive_service import cli
from archive_service.protocol.urlkeys import UrlKeys
from archive_service.stores import stats
from archive_service.stores.stats import counter
from support import COUNTER_HEADER

A = "a.example/x/2026/01.01.00.00"
B = "b.example/y/2026/01.02.00.00"
FIREFOX = "Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0"
CHROME = "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 Chrome/126.0 Safari/537.36"
GOOGLEBOT = "Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)"
CURL = "curl/8.5.0"
U1, U2, CRAWLER, RESOLVED = "192.0.2.1", "192.0.2.2", "192.0.2.3", "198.51.100.4"
JAN = datetime(2026, 1, 10, 10, 0, tzinfo=UTC).timestamp()
FEB = datetime(2026, 2, 3, 8, 0, tzinfo=UTC).timestamp()
PLATFORM = "8JMKD3MGPCW/3ER446E"

# By hand. January: u1 downloads A at +0, +10 (a double-click: +0 is dropped) and +41 (31 s
# later: counts), views A's metadata at +100, downloads A again at +3600 (the next hour: a new
# session); Googlebot fetches A three times and curl B once (robots: none counts); u2 views B's
# file list and downloads B; the resolver acknowledges A's data twice for one user 10 s apart
# (one request) and B's metadata once (an investigation).
#   A: requests u1 +10, +41, +3600 and the resolved one = 4, in sessions (u1, 10h), (u1, 11h),
#      (resolved, 10h) = 3; investigations: the 4 requests and the metadata page = 5, same 3.
#   B: investigations file list, download, resolved metadata = 3 in sessions (u2, 10h),
#      (resolved, 10h) = 2; requests the download = 1, 1 session.
# February: u1 downloads A at +0 and +29 (once), u2 at +5: A 2 requests, 2 sessions.
# Outside the range: a use on 2025-12-31 23:59:59 and one on 2026-03-01 00:00:00.
EXPECTED = {
    (A, "Total_Item_Investigations"): [5, 2],
    (A, "Unique_Item_Investigations"): [3, 2],
    (A, "Total_Item_Requests"): [4, 2],
    (A, "Unique_Item_Requests"): [3, 2],
    (B, "Total_Item_Investigations"): [3, 0],
    (B, "Unique_Item_Investigations"): [2, 0],
    (B, "Total_Item_Requests"): [1, 0],
    (B, "Unique_Item_Requests"): [1, 0],
}


def _fill(store: stats.Statistics, clock: list[float]) -> None:
    keys = UrlKeys(b"k" * 32, clock=lambda: clock[0])

    def at(t: float, ibi: str, kind: str, client: str, agent: str) -> None:
        clock[0] = t
        store.record_use(stats.Seen(ibi, kind, client, agent))

    def resolved(t: float, ibi: str, contenttype: str) -> None:
        clock[0] = t
        url = f"http://archive.example.org/col/{ibi}/doc/x.pdf"
        ack = stats.Acknowledgment(keys.issue([url]), url, contenttype, "Original", ibi, RESOLVED)
        assert store.acknowledge(ack, keys) == "counted"

    req, inv = counter.REQUEST, counter.INVESTIGATION
    at(datetime(2025, 12, 31, 23, 59, 59, tzinfo=UTC).timestamp(), A, req, U1, FIREFOX)
    at(JAN, A, req, U1, FIREFOX)
    at(JAN, B, req, CRAWLER, CURL)
    at(JAN + 10, A, req, U1, FIREFOX)
    for t in (20, 25, 60):
        at(JAN + t, A, req, CRAWLER, GOOGLEBOT)
    at(JAN + 41, A, req, U1, FIREFOX)
    at(JAN + 100, A, inv, U1, FIREFOX)
    at(JAN + 200, B, inv, U2, CHROME)
    at(JAN + 210, B, req, U2, CHROME)
    resolved(JAN + 300, A, "Data")
    resolved(JAN + 310, A, "Data")
    resolved(JAN + 400, B, "Metadata")
    at(JAN + 3600, A, req, U1, FIREFOX)
    at(FEB, A, req, U1, FIREFOX)
    at(FEB + 5, A, req, U2, CHROME)
    at(FEB + 29, A, req, U1, FIREFOX)
    at(datetime(2026, 3, 1, tzinfo=UTC).timestamp(), B, req, U1, FIREFOX)


@pytest.fixture(params=["sqlite", "postgresql"])
def where(request, tmp_path) -> list[str]:
    """The command-line options naming a store filled with the fixture."""
    clock = [JAN]
    options = ["--state-dir", str(tmp_path / "state"), "--archiveserviceibi", PLATFORM]
    if request.param == "sqlite":
        store = stats.Store(tmp_path / "state", clock=lambda: clock[0])
    else:
        url = request.getfixturevalue("database_url")
        store = stats.PostgresStore(url, clock=lambda: clock[0])
        options += ["--database", url]
    _fill(store, clock)
    assert store.problem is None
    store.close()
    return options


def run(capsys, *argv: str) -> str:
    capsys.readouterr()
    assert cli.main(["stats", *argv]) == 0
    return capsys.readouterr().out


def test_the_item_report_has_the_figures_counted_by_hand(where, capsys):
    out = run(capsys, "--report", "ir", "--begin", "2026-01", "--end", "2026-02", *where)
    table = list(csv.reader(io.StringIO(out), delimiter="\t"))
    body = {(r[0], r[14]): [int(n) for n in r[16:]] for r in table[15:]}
    assert body == EXPECTED
    for row in table[15:]:
        assert int(row[15]) == sum(int(n) for n in row[16:]), "Reporting_Period_Total"

    sushi = json.loads(
        run(capsys, "--report", "ir", "--format", "json", "--begin", "2026-01", *where)
    )
    january = {
        (item["Item"], metric): counts
        for item in sushi["Report_Items"][0]["Items"]  # items without a parent (R5.1 JSON)
        for metric, counts in item["Attribute_Performance"][0]["Performance"].items()
    }
    assert january == {k: {"2026-01": v[0]} for k, v in EXPECTED.items() if v[0]}

    summary = json.loads(run(capsys, "--format", "json", *where))
    assert (summary["total"], summary["rejected"]) == (3, 0), "acknowledgments, each once"


def test_the_item_report_follows_the_r51_rules_that_can_be_checked(where, capsys):
    out = run(capsys, "--report", "ir", "--begin", "2026-01", "--end", "2026-02", *where)
    table = list(csv.reader(io.StringIO(out), delimiter="\t"))
    assert [r[0] for r in table[:13]] == list(COUNTER_HEADER), "13 header rows in order"
    header = {r[0]: r[1] for r in table[:13]}
    assert (header["Report_Name"], header["Report_ID"], header["Release"]) == (
        "Item Report",
        "IR",
        "5.1",
    )
    assert header["Reporting_Period"] == "Begin_Date=2026-01-01; End_Date=2026-02-28"
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", header["Created"])
    assert header["Metric_Types"].split("; ") == list(counter.METRIC_TYPES)
    assert table[13] == [], "a blank row before the body"
    assert table[14] == [
        "Item",
        "Publisher",
        "Publisher_ID",
        "Platform",
        "DOI",
        "Proprietary_ID",
        "ISBN",
        "Print_ISSN",
        "Online_ISSN",
        "URI",
        "Data_Type",
        "YOP",
        "Access_Type",
        "Access_Method",
        "Metric_Type",
        "Reporting_Period_Total",
        "Jan-2026",
        "Feb-2026",
    ]
    width = len(table[14])
    for row in table[15:]:
        assert len(row) == width
        assert row[14] in counter.METRIC_TYPES
        assert row[3] == PLATFORM and row[5] == f"{PLATFORM}:{row[0]}"
        assert row[13] in ("Regular", "TDM") and row[12] in ("Controlled", "Open", "Free_To_Read")
        assert re.fullmatch(r"\d{4}", row[11])
    assert [r[14] for r in table[15:19]] == list(counter.METRIC_TYPES), "the Code's order"

    sushi = json.loads(run(capsys, "--report", "ir", "--format", "json", *where[:2]))
    head = sushi["Report_Header"]
    assert set(head) >= {
        "Report_Name",
        "Report_ID",
        "Release",
        "Institution_Name",
        "Report_Filters",
        "Created",
        "Created_By",
    }
    assert head["Report_Filters"]["Begin_Date"].endswith("-01")


def test_bad_months_are_refused_with_what_is_wrong(tmp_path, capsys):
    state = str(tmp_path / "state")
    with pytest.raises(SystemExit):
        cli.main(["stats", "--report", "ir", "--begin", "2026-13", "--state-dir", state])
    assert "'2026-13' is not a month YYYY-MM" in capsys.readouterr().err
    argv = ["stats", "--report", "ir", "--begin", "2026-03", "--end", "2026-01"]
    assert cli.main([*argv, "--state-dir", state]) == 2
    assert "--end is before --begin" in capsys.readouterr().err
    assert cli.main(["stats", "--report", "ir", "--format", "csv", "--state-dir", state]) == 2
    assert "tsv or json" in capsys.readouterr().err
