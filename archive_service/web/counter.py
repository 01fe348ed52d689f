"""COUNTER Code of Practice Release 5.1: from recorded uses to the Item Report (IR).

What is recorded (web/stats.py `Statistics.record_use`) is one row per use: its time, the item,
whether it was an investigation or a request, the content type, a `user` (a hash of client
address and User-Agent under a salt that lives one UTC day, never the address itself) and
whether the User-Agent is on the COUNTER robots list. This module applies the Code's rules to
those rows (no storage, no Flask); docs/counter.md says how uses map to metric types and
what the Archive cannot see.

- Robots: a use whose User-Agent the COUNTER list names (`counter-robots`) is left out.
- Double-click: uses of one item of the same kind by the same user less than 30 s apart
  count once (the last of a chain is kept, as the Code says).
- Sessions: user + UTC date + hour (R5.1 §7.3 without cookies); a Unique_Item_* metric counts
  an item once per session.
- Every request is also an investigation (Total_Item_Investigations counts both).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, date, datetime
from typing import Any

DOUBLE_CLICK = 30  # seconds: two uses this close or closer count once
REQUEST, INVESTIGATION = "request", "investigation"
METRIC_TYPES = (
    "Total_Item_Investigations",
    "Unique_Item_Investigations",
    "Total_Item_Requests",
    "Unique_Item_Requests",
)
HEADER_LABELS = (
    "Report_Name",
    "Report_ID",
    "Release",
    "Institution_Name",
    "Institution_ID",
    "Metric_Types",
    "Report_Filters",
    "Report_Attributes",
    "Exceptions",
    "Reporting_Period",
    "Created",
    "Created_By",
    "Registry_Record",
)
# The IR's columns without the optional item and parent details (Include_Parent_Details,
# Authors, Publication_Date, Article_Version are not asked for).
COLUMNS = (
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
)
MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")


@dataclass(frozen=True)
class Use:
    """One recorded use, as a store reads it back."""

    time: float
    ibi: str
    kind: str  # REQUEST or INVESTIGATION
    user: str
    robot: bool


def months(begin: date, end: date) -> list[str]:
    """The months from `begin` to `end` (first days), as YYYY-MM."""
    out, y, m = [], begin.year, begin.month
    while (y, m) <= (end.year, end.month):
        out.append(f"{y:04d}-{m:02d}")
        y, m = (y + 1, 1) if m == 12 else (y, m + 1)
    return out


def month_end(month: date) -> date:
    """The last day of `month`'s month."""
    y, m = (month.year + 1, 1) if month.month == 12 else (month.year, month.month + 1)
    return date.fromordinal(date(y, m, 1).toordinal() - 1)


def filtered(uses: Iterable[Use]) -> list[Use]:
    """The uses COUNTER counts: robots out, then double-clicks out (the later one kept)."""
    chains: dict[tuple[str, str, str], list[Use]] = defaultdict(list)
    for use in uses:
        if not use.robot:
            chains[(use.user, use.ibi, use.kind)].append(use)
    kept = []
    for chain in chains.values():
        chain.sort(key=lambda u: u.time)
        for use, after in zip(chain, chain[1:] + [None], strict=True):
            if after is None or after.time - use.time > DOUBLE_CLICK:
                kept.append(use)
    return kept


def figures(uses: Iterable[Use]) -> dict[str, dict[str, dict[str, int]]]:
    """{ibi: {metric type: {YYYY-MM: n}}} of the uses counted."""
    totals: dict[str, dict[str, dict[str, int]]] = defaultdict(
        lambda: {m: defaultdict(int) for m in METRIC_TYPES}
    )
    sessions: dict[tuple[str, str, str], set] = defaultdict(set)
    for use in filtered(uses):
        when = datetime.fromtimestamp(use.time, tz=UTC)
        month = when.strftime("%Y-%m")
        session = (use.user, when.strftime("%Y-%m-%d %H"))
        metrics = totals[use.ibi]
        metrics["Total_Item_Investigations"][month] += 1
        sessions[(use.ibi, "Unique_Item_Investigations", month)].add(session)
        if use.kind == REQUEST:
            metrics["Total_Item_Requests"][month] += 1
            sessions[(use.ibi, "Unique_Item_Requests", month)].add(session)
    for (ibi, metric, month), seen in sessions.items():
        totals[ibi][metric][month] = len(seen)
    return {ibi: {m: dict(v) for m, v in t.items()} for ibi, t in totals.items()}


def item_report(
    uses: Iterable[Use], begin: date, end: date, platform: str, created: datetime
) -> dict[str, Any]:
    """The IR of `uses` for the months `begin`..`end` (first days of months), in the shape of
    COUNTER_SUSHI's JSON (Report_Header, Report_Items)."""
    last = month_end(end)
    header = {
        "Report_Name": "Item Report",
        "Report_ID": "IR",
        "Release": "5.1",
        "Institution_Name": "The World",
        "Institution_ID": {},
        "Report_Filters": {
            "Begin_Date": begin.isoformat(),
            "End_Date": last.isoformat(),
            "Access_Method": ["Regular"],
            "Metric_Type": list(METRIC_TYPES),
        },
        "Report_Attributes": {},
        "Exceptions": [],
        "Created": created.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "Created_By": platform,
        "Registry_Record": "",
    }
    items = []
    for ibi, metrics in sorted(figures(uses).items()):
        performance = {m: dict(sorted(metrics[m].items())) for m in METRIC_TYPES if metrics[m]}
        items.append(
            {
                "Item": ibi,
                "Item_ID": {"Proprietary": f"{platform}:{ibi}"},
                "Platform": platform,
                "Publisher": "",
                "Attribute_Performance": [
                    {
                        "Data_Type": "Other",
                        "YOP": "0001",  # unknown, as the Code spells it
                        "Access_Type": "Open",
                        "Access_Method": "Regular",
                        "Performance": performance,
                    }
                ],
            }
        )
    return {"Report_Header": header, "Report_Items": items, "months": months(begin, end)}


def _month_heading(month: str) -> str:
    year, number = month.split("-")
    return f"{MONTHS[int(number) - 1]}-{year}"


def tsv_rows(report: dict[str, Any]) -> list[list[str]]:
    """The IR as the Code's tabular form: 13 header rows, a blank row, the column headings,
    one row per item and metric type."""
    head, filters = report["Report_Header"], report["Report_Header"]["Report_Filters"]
    values = {
        "Report_Name": head["Report_Name"],
        "Report_ID": head["Report_ID"],
        "Release": head["Release"],
        "Institution_Name": head["Institution_Name"],
        "Institution_ID": "",
        "Metric_Types": "; ".join(filters["Metric_Type"]),
        "Report_Filters": "Access_Method=" + "|".join(filters["Access_Method"]),
        "Report_Attributes": "",
        "Exceptions": "",
        "Reporting_Period": f"Begin_Date={filters['Begin_Date']}; End_Date={filters['End_Date']}",
        "Created": head["Created"],
        "Created_By": head["Created_By"],
        "Registry_Record": head["Registry_Record"],
    }
    out = [[label, values[label]] for label in HEADER_LABELS]
    out.append([])
    month_list = report["months"]
    out.append(list(COLUMNS) + [_month_heading(m) for m in month_list])
    for item in report["Report_Items"]:
        for attrs in item["Attribute_Performance"]:
            for metric in METRIC_TYPES:
                counts = attrs["Performance"].get(metric)
                if not counts:
                    continue
                by_month = [counts.get(m, 0) for m in month_list]
                out.append(
                    [
                        item["Item"],
                        item["Publisher"],
                        "",
                        item["Platform"],
                        "",
                        item["Item_ID"]["Proprietary"],
                        "",
                        "",
                        "",
                        "",
                        attrs["Data_Type"],
                        attrs["YOP"],
                        attrs["Access_Type"],
                        attrs["Access_Method"],
                        metric,
                        str(sum(by_month)),
                    ]
                    + [str(n) for n in by_month]
                )
    return out


def sushi(report: dict[str, Any]) -> dict[str, Any]:
    """The IR as COUNTER_SUSHI's JSON (without the month list the tabular form needs)."""
    return {"Report_Header": report["Report_Header"], "Report_Items": report["Report_Items"]}
