"""The statistics page's COUNTER figures (issue 20), with WebTest: a month's four metric types,
its top items, requests per day and per month as SVG bar charts with their figures as tables,
from a month of uses built by hand (support.record_month_of_uses), beside the acknowledgments
counted (whose meaning is unchanged)."""

from __future__ import annotations

from pathlib import Path

import pytest

from archive_service.web import create_app
from support import ITEM_A, ITEM_B, ITEM_C, SERVICE, Client, record_month_of_uses

PAGE = f"/{SERVICE}/statistics"


@pytest.fixture
def client(settings) -> Client:
    record_month_of_uses(Path(settings["state_dir"]))
    return Client(create_app(settings), "/archive")


@pytest.fixture(params=["sqlite", "postgresql"])
def either(request, settings) -> Client:
    """The app over the month of uses in either store."""
    database = request.getfixturevalue("database_url") if request.param == "postgresql" else ""
    record_month_of_uses(Path(settings["state_dir"]), database)
    return Client(create_app(dict(settings, database=database)), "/archive")


def table(page, caption: str) -> dict[str, list[str]]:
    """The rows of the table whose caption starts with `caption`: row heading -> cells."""
    found = page.html.find("caption", string=lambda s: s and s.startswith(caption))
    assert found is not None, caption
    return {
        row.th.get_text(strip=True): [td.get_text(strip=True) for td in row.find_all("td")]
        for row in found.parent.tbody.find_all("tr")
    }


def test_the_month_has_the_figures_counted_by_hand(either):
    page = either.get(PAGE, params={"month": "2026-01"}, status=200)
    # Robots and the double-click out; a unique figure once per session (user and hour).
    assert table(page, "All items, 2026-01") == {
        "Total_Item_Investigations": ["6"],
        "Unique_Item_Investigations": ["4"],
        "Total_Item_Requests": ["5"],
        "Unique_Item_Requests": ["4"],
    }
    top = table(page, "The 3 items most requested in 2026-01")
    assert list(top.items()) == [(ITEM_A, ["2", "2"]), (ITEM_C, ["2", "2"]), (ITEM_B, ["1", "2"])]
    api = page.html.find("a", string="COUNTER API")["href"]
    assert api == f"/archive/{SERVICE}/r51/reports/ir"
    # The acknowledgments' count keeps its meaning: none was sent.
    counted = page.html.find("dt", string="Counted").find_next_sibling("dd")
    assert counted.get_text(strip=True) == "0"


def test_requests_per_day_and_month_are_drawn_and_tabled(either):
    page = either.get(PAGE, params={"month": "2026-01"}, status=200)
    days = table(page, "Total_Item_Requests per day")
    assert list(days)[0] == "2026-01-02" and list(days)[-1] == "2026-01-31"
    assert {d: n for d, (n,) in days.items() if n != "0"} == {"2026-01-05": "3", "2026-01-20": "2"}
    months = table(page, "Total_Item_Requests per month")
    assert list(months)[0] == "2025-02" and list(months)[-1] == "2026-01"
    assert {m: n for m, (n,) in months.items() if n != "0"} == {"2025-12": "2", "2026-01": "5"}

    day_chart, month_chart = page.html.find_all("svg")
    for svg, bars in ((day_chart, 30), (month_chart, 12)):
        # A picture with a name and a description a screen reader reads, no script.
        assert svg["role"] == "img"
        names = [svg.find(id=i).get_text() for i in svg["aria-labelledby"].split()]
        assert names[0].startswith("Requests per") and "table" in names[1]
        assert svg.find("script") is None
        assert len(svg.find_all("rect", class_="bar")) == bars
    # Heights to scale: the axis tops at 4 (3, rounded up to an even number).
    heights = {
        rect.title.get_text(): float(rect["height"])
        for rect in day_chart.find_all("rect", class_="bar")
    }
    tallest = heights["2026-01-05: 3 requests"]
    assert heights["2026-01-20: 2 requests"] == pytest.approx(tallest * 2 / 3, abs=0.02)
    assert sum(1 for h in heights.values() if h == 0) == 28
    assert [t.get_text() for t in day_chart.find_all("text")][:3] == ["0", "2", "4"]
    assert script_free(page.text)


def script_free(html: str) -> bool:
    return "<script" not in html.lower()


def test_months_are_linked_and_a_bad_month_is_a_clear_error(client):
    page = client.get(PAGE, params={"month": "2026-01"}, status=200)
    links = {a.get_text(strip=True): a["href"] for a in page.html.find_all("a")}
    assert links["Previous month"] == f"/archive{PAGE}?month=2025-12"
    assert links["Next month"] == f"/archive{PAGE}?month=2026-02"
    current = client.get(PAGE, status=200)
    assert "Next month" not in current.text  # the month still going on has no next
    assert "Previous month" in current.text
    # The first month a use can be in has no previous: its link was a 400 (1969-12).
    first = client.get(PAGE, params={"month": "1970-01"}, status=200)
    assert "Previous month" not in first.text and "Next month" in first.text
    bad = client.get(PAGE, params={"month": "2026-13"}, status=400)
    assert "'2026-13' is not a month such as 2026-01 (YYYY-MM)" in bad.text


def test_past_days_are_counted_once_and_today_again_after_a_minute(tmp_path):
    from datetime import UTC, date, datetime

    from archive_service.stores import stats
    from archive_service.stores.stats import counter
    from archive_service.web import usage

    record_month_of_uses(tmp_path)
    now = [datetime(2026, 1, 20, 12, 0, tzinfo=UTC).timestamp()]
    store = stats.Store(tmp_path, clock=lambda: now[0])
    figures = usage.Usage(store, SERVICE, clock=lambda: now[0])
    january = date(2026, 1, 1)
    before = figures.page(january)
    assert before["totals"]["Total_Item_Requests"] == 5
    assert dict(before["days"])["2026-01-20"] == 2

    def use(t: float) -> None:
        now[0] = t
        store.record_use(stats.Seen(ITEM_B, counter.REQUEST, "192.0.2.9", "Mozilla/5.0 (X11)"))

    noon = datetime(2026, 1, 20, 12, 0, tzinfo=UTC).timestamp()
    use(datetime(2026, 1, 5, 15, 0, tzinfo=UTC).timestamp())  # a past day, written late
    use(noon + 10)
    now[0] = noon + 30
    assert figures.page(january) == before  # within the minute: as counted
    now[0] = noon + 61
    after = figures.page(january)
    assert dict(after["days"])["2026-01-20"] == 3  # today, counted again
    assert dict(after["days"])["2026-01-05"] == 3  # a past day: as first counted
    assert after["totals"]["Total_Item_Requests"] == 7  # the month still going on: all


@pytest.mark.parametrize("month", ["0001-01", "9999-12", "1969-12"])
def test_a_month_out_of_range_is_a_clear_error(client, month):
    bad = client.get(PAGE, params={"month": month}, status=400)
    assert "from 1970-01 to 9998-12" in bad.text


KEY = "harvester-key-0123456789"


def test_with_a_counter_api_key_the_usage_is_shown_to_key_holders_only(settings):
    # Issue 30, finding 10: the page showed the month's figures and top items that the COUNTER
    # API refused without the key. One policy: usage figures, on the page or from the API,
    # are for those given the key (`api_key`, checked alike).
    record_month_of_uses(Path(settings["state_dir"]))
    client = Client(create_app(dict(settings, counter_api_key=KEY)), "/archive")
    for params in ({"month": "2026-01"}, {"month": "2026-01", "api_key": "another-key-0123456"}):
        page = client.get(PAGE, params=params, status=200)
        for shown in ("Total_Item_Requests", ITEM_A, "Counted", "items most"):
            assert shown not in page.text, shown
        assert "not public" in page.text
        assert page.html.find("a", string="COUNTER API") is not None
    page = client.get(PAGE, params={"month": "2026-01", "api_key": KEY}, status=200)
    assert table(page, "All items, 2026-01")["Total_Item_Requests"] == ["5"]
    assert "no-store" in page.headers["Cache-Control"]
    assert page.headers["Referrer-Policy"] == "no-referrer"
    previous = page.html.find("a", string="Previous month")["href"]
    assert f"api_key={KEY}" in previous, "the months stay readable to the key holder"
    # Without a key set, the page is public, as the API is.
    public = Client(create_app(settings), "/archive").get(PAGE, params={"month": "2026-01"})
    assert table(public, "All items, 2026-01")["Total_Item_Requests"] == ["5"]


def test_a_past_month_is_kept_as_its_figures_not_its_whole_report(tmp_path):
    # Issue 30, fifth adversarial pass: each process kept every past month's whole Item
    # Report (~1.8 KB an item used), and a page asks 12 months: with 20,000 items used a
    # month, one view of a page kept 437 MB a worker. What the page shows is kept instead.
    import tracemalloc
    from datetime import UTC, date, datetime

    from archive_service.stores import stats
    from archive_service.stores.stats import counter
    from archive_service.web import usage

    now = [datetime(2025, 11, 10, 12, 0, tzinfo=UTC).timestamp()]
    store = stats.Store(tmp_path, clock=lambda: now[0])
    for n in range(600):
        store.record_use(
            stats.Seen(f"{ITEM_A}{n}", counter.REQUEST, "192.0.2.9", "Mozilla/5.0 (X11)")
        )
    store.flush()
    now[0] = datetime(2026, 2, 1, tzinfo=UTC).timestamp()
    figures = usage.Usage(store, SERVICE, clock=lambda: now[0])
    november = date(2025, 11, 1)
    figures.page(november)  # the store's own caches warmed
    figures = usage.Usage(store, SERVICE, clock=lambda: now[0])
    tracemalloc.start()
    try:
        figures.page(november)
        kept = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    again = figures.page(november)
    assert again["items"] == 600 and len(again["top"]) == usage.TOP
    assert again["totals"]["Total_Item_Requests"] == 600
    assert kept < 150_000, kept  # 600 items' whole report: ~1.1 MB


def test_the_acknowledgments_counted_are_read_again_at_most_once_a_minute(settings):
    # Issue 30, fifth adversarial pass: every view read each (day, item) counted in 30 days
    # into Python, 1.3-1.7 s of CPU a view at 10,000 items acknowledged a day (a page ~10 ms).
    from urllib.parse import urlencode

    from archive_service.protocol import pairs
    from support import acknowledgment

    client = Client(create_app(settings), "")
    before = client.get(PAGE, status=200)
    ack = acknowledgment(dict(pairs.parse(client.url_request("8JMKD3MGP8W/35MMLL8").text)))
    client.test.get(f"/{SERVICE}?{urlencode(ack)}", status=200)
    assert client.get(PAGE, status=200).text == before.text
