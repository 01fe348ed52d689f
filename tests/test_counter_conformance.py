"""The Item Report against the rules of the COUNTER Code of Practice R5.1 that a program can
check: the header's labels, order and formats (§3.2.1, §4.4.1), the columns and their order
(§4.4.2; an optional column only when Report_Attributes lists it), the metric types an IR may
have, the Data_Type and Access_Type values (§3.3), and the JSON shape of COUNTER_SUSHI R5.1
(Report_Header; Report_Items holding the `Items` of no parent; minimal Attribute_Performance).
The uses come from a real app: downloads and pages of an open item and of a licensed one."""

from __future__ import annotations

import calendar
import csv
import io
import json
import re
from datetime import date

import webtest

from archive_service import cli
from archive_service.protocol.urlkeys import UrlKeys
from archive_service.stores import stats
from archive_service.stores.stats import counter
from archive_service.web import create_app
from support import COUNTER_HEADER, SERVICE

LICENSED = "sid.inpe.br/mtc-m19/2014/02.11.10.05"  # access: networks
OPEN = "iconet.com.br/banon/2009/09.09.22.01"
INSIDE = "150.163.2.175"  # in the licensed item's networks
BROWSER = {"User-Agent": "Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128"}

HEADER = COUNTER_HEADER
# Table 4.p for the IR, in order; M mandatory, C only when called for.
COLUMNS = (
    ("Item", "M"),
    ("Publisher", "M"),
    ("Publisher_ID", "M"),
    ("Platform", "M"),
    ("Authors", "C"),
    ("Publication_Date", "C"),
    ("Article_Version", "C"),
    ("DOI", "M"),
    ("Proprietary_ID", "M"),
    ("ISBN", "M"),
    ("Print_ISSN", "M"),
    ("Online_ISSN", "M"),
    ("URI", "M"),
    ("Data_Type", "M"),
    ("YOP", "C"),
    ("Access_Type", "C"),
    ("Access_Method", "C"),
    ("Metric_Type", "M"),
    ("Reporting_Period_Total", "M"),
)
IR_METRICS = {
    "Total_Item_Investigations",
    "Total_Item_Requests",
    "Unique_Item_Investigations",
    "Unique_Item_Requests",
    "Limit_Exceeded",
    "No_License",
}
IR_FILTERS = {"Data_Type", "YOP", "Access_Type", "Access_Method", "Platform"}
ACCESS_TYPES = {"Controlled", "Open", "Free_To_Read"}
DATA_TYPES = {
    "Article", "Audiovisual", "Book", "Book_Segment", "Conference", "Conference_Item",
    "Database_Aggregated", "Database_AI", "Database_Full", "Dataset", "Image",
    "Interactive_Resource", "Journal", "Multimedia", "News_Item", "Newspaper_or_Newsletter",
    "Other", "Patent", "Platform", "Reference_Item", "Reference_Work", "Report", "Software",
    "Sound", "Standard", "Thesis_or_Dissertation", "Unspecified",
}  # fmt: skip
JSON_HEADER = set(HEADER) - {"Metric_Types", "Reporting_Period"}
JSON_ITEM = {"Item", "Publisher", "Publisher_ID", "Platform", "Authors", "Publication_Date"}
JSON_ITEM |= {"Article_Version", "Item_ID", "Attribute_Performance"}
PAIRS = re.compile(r"[A-Za-z_]+=[^;|=]+(\|[^;|=]+)*")


def used_items(settings) -> str:
    """Uses of an open and a licensed item through the app; the state directory."""
    test = webtest.TestApp(create_app(settings))
    user = {"REMOTE_ADDR": INSIDE}
    test.get(f"/col/{OPEN}/doc/reference.bib", headers=BROWSER, extra_environ=user)
    test.get(f"/col/{LICENSED}/doc/article.pdf", headers=BROWSER, extra_environ=user)
    test.get(f"/{SERVICE}/filelist/{LICENSED}", headers=BROWSER, extra_environ=user)
    test.app.extensions["stats"].flush()
    return settings["state_dir"]


def ir(capsys, state: str, *options: str) -> str:
    today = date.today().strftime("%Y-%m")
    argv = ["stats", "--report", "ir", "--begin", today, "--state-dir", state, *options]
    capsys.readouterr()
    assert cli.main([*argv, "--archiveserviceibi", "8JMKD3MGPCW/3ER446E"]) == 0
    return capsys.readouterr().out


def test_the_tabular_item_report_follows_r51(settings, capsys):
    table = list(csv.reader(io.StringIO(ir(capsys, used_items(settings))), delimiter="\t"))
    assert [row[0] for row in table[:13]] == list(HEADER)
    assert table[13] == [], "row 14 is blank"
    head = {row[0]: row[1] for row in table[:13]}
    assert all(len(row) == 2 for row in table[:13])
    assert (head["Report_Name"], head["Report_ID"], head["Release"]) == ("Item Report", "IR", "5.1")
    assert head["Institution_Name"] == "The World"
    assert re.fullmatch(r"[A-Za-z0-9_./]+:0{16}", head["Institution_ID"]), "the World's ID"
    assert set(head["Metric_Types"].split("; ")) <= IR_METRICS
    filters = dict(f.split("=") for f in head["Report_Filters"].split("; ") if f)
    assert all(PAIRS.fullmatch(f) for f in head["Report_Filters"].split("; ") if f)
    assert set(filters) <= IR_FILTERS, "Metric_Type and the dates have rows of their own"
    attributes = dict(a.split("=") for a in head["Report_Attributes"].split("; ") if a)
    shown = set(attributes.get("Attributes_To_Show", "").split("|")) - {""}
    begin, end = re.fullmatch(
        r"Begin_Date=(\d{4}-\d\d-01); End_Date=(\d{4}-\d\d-\d\d)", head["Reporting_Period"]
    ).groups()
    last = date.fromisoformat(end)
    assert last.day == calendar.monthrange(last.year, last.month)[1], "the month's last day"
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", head["Created"]), "RFC 3339"
    assert head["Exceptions"] == "" or re.fullmatch(r"\d+: [^;]+( \([^)]*\))?", head["Exceptions"])
    assert head["Registry_Record"] == "" or head["Registry_Record"].startswith("https://")

    headings = table[14]
    months = headings[len(headings) - 1 :]
    assert months == [date.fromisoformat(begin).strftime("%b-%Y")]
    named = headings[: -len(months)]
    expected = [name for name, need in COLUMNS if need == "M" or name in shown]
    assert named == expected, "the mandatory columns and those Attributes_To_Show lists"
    rows = [dict(zip(headings, row, strict=True)) for row in table[15:]]
    assert rows
    for row in rows:
        assert row["Metric_Type"] in head["Metric_Types"].split("; ")
        assert row["Data_Type"] in DATA_TYPES - {"Other"}, "Other is for a known type"
        assert row["Access_Type"] in ACCESS_TYPES and row["Access_Method"] in {"Regular", "TDM"}
        assert re.fullmatch(r"\d{4}", row["YOP"])
        assert row["Proprietary_ID"] == f"{row['Platform']}:{row['Item']}"
        assert int(row["Reporting_Period_Total"]) == sum(int(row[m]) for m in months)
    access = {row["Item"]: row["Access_Type"] for row in rows}
    assert access == {OPEN: "Open", LICENSED: "Controlled"}, "licensed items are Controlled"
    order = [row["Metric_Type"] for row in rows if row["Item"] == LICENSED]
    assert order == [m for m in counter.METRIC_TYPES if m in order], "one order of metrics"


def test_the_json_item_report_is_shaped_as_counter_sushi_r51(settings, capsys):
    report = json.loads(ir(capsys, used_items(settings), "--format", "json"))
    assert set(report) == {"Report_Header", "Report_Items"}
    head = report["Report_Header"]
    assert set(head) <= JSON_HEADER
    assert {"Release", "Report_ID", "Report_Name", "Created", "Created_By"} <= set(head)
    assert head["Release"] == "5.1" and head["Report_ID"] == "IR"
    assert all(isinstance(v, list) for v in head["Institution_ID"].values())
    filters = head["Report_Filters"]
    assert re.fullmatch(r"\d{4}-\d\d-01", filters["Begin_Date"])
    assert all(
        isinstance(v, list) for k, v in filters.items() if k not in ("Begin_Date", "End_Date")
    )
    assert set(filters.get("Metric_Type", [])) <= IR_METRICS
    shown = set(head.get("Report_Attributes", {}).get("Attributes_To_Show", []))
    assert all(isinstance(e, dict) and "Code" in e for e in head.get("Exceptions", []))

    (group,) = report["Report_Items"]
    assert set(group) == {"Items"}, "no parent details asked for: the items of no parent"
    found = {}
    for item in group["Items"]:
        assert set(item) <= JSON_ITEM and {"Item", "Platform", "Attribute_Performance"} <= set(item)
        combos = []
        for attrs in item["Attribute_Performance"]:
            assert set(attrs) - {"Data_Type", "Performance"} <= shown
            assert attrs["Data_Type"] in DATA_TYPES - {"Other"}
            assert attrs["Access_Type"] in ACCESS_TYPES
            combos.append(tuple(sorted((k, v) for k, v in attrs.items() if k != "Performance")))
            for metric, months in attrs["Performance"].items():
                assert metric in IR_METRICS
                assert all(re.fullmatch(r"\d{4}-\d\d", m) and n > 0 for m, n in months.items())
            found[item["Item"]] = attrs["Access_Type"]
        assert len(combos) == len(set(combos)), "minimal: one object per attribute combination"
    assert found == {OPEN: "Open", LICENSED: "Controlled"}


def test_acknowledged_uses_carry_the_items_access_type(tmp_path):
    keys = UrlKeys(b"k" * 32)
    store = stats.Store(tmp_path)
    for ibi, access in (("a/b", counter.CONTROLLED), ("a/c", counter.OPEN)):
        url = f"http://files.example.org/{ibi}/doc/x.pdf"
        ack = stats.Acknowledgment(
            keys.issue([url]), url, "Data", "Original", ibi, "192.0.2.1", access=access
        )
        assert store.acknowledge(ack, keys) == "counted"
    today = date.today()
    report = store.item_report(today, today, "P")
    got = {i["Item"]: i["Attribute_Performance"][0]["Access_Type"] for i in report["Report_Items"]}
    assert got == {"a/b": "Controlled", "a/c": "Open"}
    assert counter.access_type(()) == "Open"
    assert counter.access_type(("10.0.0.0/8",)) == "Controlled"
    store.close()
