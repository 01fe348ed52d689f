"""The COUNTER API (COUNTER_SUSHI R5.1) of the Item Report (issue 20), with WebTest: the
figures of a month of uses built by hand (support.record_month_of_uses) in SQLite and in
PostgreSQL, each Exception the API gives (the request's ones with their HTTP status, the
report's in its header), the paths under the mount point, and the key."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from archive_service.web import create_app
from fronts import public_copy
from isolation import in_child
from support import ITEM_A, ITEM_B, ITEM_C, SERVICE, Client, record_month_of_uses

IR = f"/{SERVICE}/r51/reports/ir"
KEY = "the-harvesters-key-0123"
JANUARY = {"customer_id": "anyone", "begin_date": "2026-01", "end_date": "2026-01"}


def performance(report: dict) -> dict:
    """{(item, metric type): {YYYY-MM: n}} of a COUNTER_SUSHI R5.1 Item Report (items
    without a parent sit in the `Items` of one Report_Item)."""
    return {
        (item["Item"], metric): by_month
        for group in report["Report_Items"]
        for item in group["Items"]
        for attributes in item["Attribute_Performance"]
        for metric, by_month in attributes["Performance"].items()
    }


def codes(report: dict) -> list[int]:
    return [e["Code"] for e in report["Report_Header"]["Exceptions"]]


def app_with_uses(settings: dict, database: str = "", **more) -> Client:
    settings = {**settings, "stats_retention_days": 0, **more}
    if database:
        settings["database"] = database
    record_month_of_uses(Path(settings["state_dir"]), database)
    return Client(create_app(settings), "/archive")


@pytest.fixture
def client(settings) -> Client:
    return app_with_uses(settings)


@pytest.mark.parametrize("store", ["sqlite", "postgresql"])
def test_the_item_report_has_the_figures_counted_by_hand(settings, store, request):
    database = request.getfixturevalue("database_url") if store == "postgresql" else ""
    client = app_with_uses(settings, database)
    params = dict(JANUARY, begin_date="2025-12")
    report = client.get(IR, params=params, status=200).json
    dec, jan = "2025-12", "2026-01"
    # December: u1 requests A twice 60 s apart in one hour. January: A twice (the
    # double-click and Googlebot out), B viewed and requested, C in two hours.
    assert performance(report) == {
        (ITEM_A, "Total_Item_Investigations"): {dec: 2, jan: 2},
        (ITEM_A, "Unique_Item_Investigations"): {dec: 1, jan: 1},
        (ITEM_A, "Total_Item_Requests"): {dec: 2, jan: 2},
        (ITEM_A, "Unique_Item_Requests"): {dec: 1, jan: 1},
        (ITEM_B, "Total_Item_Investigations"): {jan: 2},
        (ITEM_B, "Unique_Item_Investigations"): {jan: 1},
        (ITEM_B, "Total_Item_Requests"): {jan: 1},
        (ITEM_B, "Unique_Item_Requests"): {jan: 1},
        (ITEM_C, "Total_Item_Investigations"): {jan: 2},
        (ITEM_C, "Unique_Item_Investigations"): {jan: 2},
        (ITEM_C, "Total_Item_Requests"): {jan: 2},
        (ITEM_C, "Unique_Item_Requests"): {jan: 2},
    }
    header = report["Report_Header"]
    assert (header["Report_ID"], header["Release"], header["Created_By"]) == ("IR", "5.1", SERVICE)
    assert header["Report_Filters"]["Begin_Date"] == "2025-12-01"
    assert header["Report_Filters"]["End_Date"] == "2026-01-31"
    assert header["Exceptions"] == []


def test_days_name_their_months(client):
    by_day = client.get(IR, params=dict(JANUARY, begin_date="2026-01-01", end_date="2026-01-31"))
    by_month = client.get(IR, params=JANUARY)
    assert performance(by_day.json) == performance(by_month.json)
    filters = [r.json["Report_Header"]["Report_Filters"] for r in (by_day, by_month)]
    assert filters[0] == filters[1]


@pytest.mark.parametrize(
    "params, status, code, data",
    [
        ({"begin_date": "2026-01"}, 400, 1030, "begin_date and end_date are required"),
        ({"end_date": "2026-01"}, 400, 1030, "begin_date and end_date are required"),
        ({"begin_date": "2026-13", "end_date": "2026-12"}, 400, 3020, "begin_date '2026-13'"),
        ({"begin_date": "2026-01", "end_date": "2026-02-30"}, 400, 3020, "end_date '2026-02-30'"),
        ({"begin_date": "last month", "end_date": "2026-01"}, 400, 3020, "is not a date"),
        ({"begin_date": "2026-02", "end_date": "2026-01"}, 400, 3020, "begin_date is after"),
        ({"begin_date": "0001-01", "end_date": "2026-01"}, 400, 3020, "from 1970-01 to 9998-12"),
        ({"begin_date": "2026-01", "end_date": "9999-12"}, 400, 3020, "from 1970-01 to 9998-12"),
    ],
)
def test_a_request_that_cannot_be_answered_is_one_exception(client, params, status, code, data):
    got = client.get(IR, params=params, status=status)
    assert got.content_type == "application/json"
    assert got.json["Code"] == code and data in got.json["Data"]
    assert set(got.json) == {"Code", "Message", "Data"}  # R5.1: no Severity


def test_what_the_report_differs_in_is_in_its_header(client):
    empty = client.get(IR, params=dict(JANUARY, begin_date="2025-06", end_date="2025-06")).json
    assert codes(empty) == [3030] and empty["Report_Items"] == []

    this_month = datetime.now(UTC).strftime("%Y-%m")
    going_on = client.get(IR, params=dict(JANUARY, end_date=this_month), status=200).json
    assert codes(going_on) == [3031]
    assert going_on["Report_Header"]["Exceptions"][0]["Data"].endswith(this_month)
    assert performance(going_on) == performance(client.get(IR, params=JANUARY).json)
    only_now = dict(JANUARY, begin_date=this_month, end_date=this_month)
    assert codes(client.get(IR, params=only_now).json) == [3031]

    extra = client.get(IR, params=dict(JANUARY, granularity="Totals", yop="2020")).json
    assert codes(extra) == [3050]
    assert extra["Report_Header"]["Exceptions"][0]["Data"].endswith("granularity, yop")
    assert performance(extra) == performance(client.get(IR, params=JANUARY).json)

    elsewhere = client.get(IR, params=dict(JANUARY, platform="another")).json
    assert codes(elsewhere) == [3060] and elsewhere["Report_Items"] == []
    assert codes(client.get(IR, params=dict(JANUARY, platform=SERVICE)).json) == []


def test_a_report_from_1970_asks_no_day_without_uses_one_by_one(client, monkeypatch):
    # A GET of the public API from 1970-01 asked the store about each of 20,000 days (1.5 s
    # of PostgreSQL); the days outside the first and last use's are not asked one by one.
    import sqlite3

    counted = []
    connect = sqlite3.connect

    def traced(*args, **kwargs):
        conn = connect(*args, **kwargs)
        conn.set_trace_callback(counted.append)
        return conn

    monkeypatch.setattr(sqlite3, "connect", traced)
    since_1970 = client.get(IR, params=dict(JANUARY, begin_date="1970-01")).json
    days_asked = [sql for sql in counted if "FROM uses WHERE t >=" in sql]
    assert 0 < len(days_asked) <= 2 * 37, len(days_asked)  # Dec 15 to Jan 20 at most
    winter = client.get(IR, params=dict(JANUARY, begin_date="2025-12")).json
    assert performance(since_1970) == performance(winter)
    assert performance(winter)[(ITEM_A, "Total_Item_Requests")] == {"2025-12": 2, "2026-01": 2}


def test_months_before_the_retention_are_said_to_be_gone(settings):
    client = app_with_uses(settings, stats_retention_days=30)
    report = client.get(IR, params=JANUARY).json
    assert codes(report) == [3032]
    assert "uses are kept 30 days" in report["Report_Header"]["Exceptions"][0]["Data"]
    assert performance(report)[(ITEM_C, "Total_Item_Requests")] == {"2026-01": 2}


def test_status_reports_and_members_under_the_mount_point(client):
    (status,) = client.get(f"/{SERVICE}/r51/status", status=200).json
    assert status["Service_Active"] is True and status["Alerts"] == []
    (ir,) = client.get(f"/{SERVICE}/r51/reports", status=200).json
    assert (ir["Report_ID"], ir["Release"]) == ("IR", "5.1")
    assert ir["Path"] == f"/archive/{SERVICE}/r51/reports/ir"
    now = datetime.now(UTC)
    previous = f"{now.year - 1}-12" if now.month == 1 else f"{now.year}-{now.month - 1:02d}"
    assert ir["Last_Month_Available"] == previous
    assert "First_Month_Available" not in ir  # nothing is deleted (retention 0)
    (member,) = client.get(f"/{SERVICE}/r51/members?customer_id=x", status=200).json
    assert (member["Customer_ID"], member["Name"]) == ("x", "The World")
    client.get(f"/{SERVICE}/r51/reports/pr", status=404)  # no other report: the path is wrong


def test_the_key_guards_all_but_the_status(settings):
    client = app_with_uses(settings, counter_api_key=KEY)
    for path in (IR, f"/{SERVICE}/r51/reports", f"/{SERVICE}/r51/members"):
        missing = client.get(path, params=JANUARY, status=401).json
        assert (missing["Code"], missing["Message"]) == (2020, "APIKey Invalid")
        assert "api_key is required" in missing["Data"]
        for wrong in (KEY[:-1], KEY + "0", KEY.upper(), "é" * 23):
            refused = client.get(path, params=dict(JANUARY, api_key=wrong), status=401).json
            assert refused["Code"] == 2020 and KEY not in str(refused)
        right = client.get(path, params=dict(JANUARY, api_key=KEY), status=200)
        assert right.headers["Cache-Control"] == "no-store"
    report = client.get(IR, params=dict(JANUARY, api_key=KEY)).json
    assert codes(report) == []  # the key is a known parameter, not an unrecognized one
    assert performance(report)[(ITEM_C, "Unique_Item_Requests")] == {"2026-01": 2}
    client.get(f"/{SERVICE}/r51/status", status=200)  # public, as the Code requires


def test_statistics_that_cannot_be_read_are_a_503_exception():
    # A state directory the serving user may not look into (mod_wsgi as www-data).
    with public_copy() as top:
        (top / "locked").mkdir(mode=0o700)

        def child():
            settings = {
                "collection": str(top / "collection"),
                "archiveaddress": "archive.example.org",
                "archiveserviceibi": SERVICE,
                "resolver": "none",
                "state_dir": str(top / "locked" / "state"),
            }
            return Client(create_app(settings), "").get(IR, params=JANUARY, status=503).json

        refused, _ = in_child(child, unprivileged=True)
    assert (refused["Code"], refused["Message"]) == (1000, "Service Not Available")
    assert "Permission denied" in refused["Data"]
