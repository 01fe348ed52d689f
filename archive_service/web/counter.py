"""COUNTER Code of Practice Release 5.1: from recorded uses to the Item Report (IR).

What is recorded (web/stats.py `Statistics.record_use`) is one row per use: its time, the item,
whether it was an investigation or a request, the content type, a `user` (a hash of client
address and User-Agent under a salt that lives one UTC day, never the address itself) and
whether the User-Agent is on the COUNTER robots list. This module holds the Code's rules over
those rows, as one SQL query each store runs per UTC day (`month_query`; a month adds up
its days, web/stats.py), and the report's
forms (no connection, no Flask); docs/counter.md says how uses map to metric types and what
the Archive cannot see.

- Robots: a use whose User-Agent the COUNTER list names (`counter-robots`) is left out.
- Double-click: uses of one item of the same kind by the same user less than 30 s apart
  count once (the last of a chain is kept, as the Code says).
  Within a UTC day: the user is a hash under that day's salt.
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


def month_query(table: str, user: str, hour: str, param: str) -> str:
    """The Code's rules over the uses of one month (`t` from the first `param` to before the
    second), as one query for either store (their SQL differs in `user`'s column, the hour's
    arithmetic and the parameter mark): robots out; of the uses of one item and kind by one
    user, one followed by another within DOUBLE_CLICK seconds out (the later kept); then per
    item the four metric types, a request also an investigation, unique per session (user
    and hour). In the database: a month of a million uses is not a million Python objects."""
    return f"""
WITH w AS (
    SELECT ibi, kind, {user} AS u, t,
        LEAD(t) OVER (PARTITION BY {user}, ibi, kind ORDER BY t) AS next
    FROM {table} WHERE t >= {param} AND t < {param} AND NOT robot
), kept AS (
    SELECT ibi, kind, u || ':' || {hour} AS session FROM w
    WHERE next IS NULL OR next - t > {DOUBLE_CLICK}
)
SELECT ibi, count(*), count(DISTINCT session),
    sum(CASE WHEN kind = '{REQUEST}' THEN 1 ELSE 0 END),
    count(DISTINCT CASE WHEN kind = '{REQUEST}' THEN session END)
FROM kept GROUP BY ibi
"""


def figures(months_rows: dict[str, Iterable[tuple]]) -> dict[str, dict[str, dict[str, int]]]:
    """{ibi: {metric type: {YYYY-MM: n}}} from each month's rows of `month_query`."""
    out: dict[str, dict[str, dict[str, int]]] = defaultdict(lambda: {m: {} for m in METRIC_TYPES})
    for month, found in months_rows.items():
        for ibi, *counts in found:
            for metric, n in zip(METRIC_TYPES, counts, strict=True):
                if n:
                    out[ibi][metric][month] = int(n)
    return out


def item_report(
    counted: dict[str, dict[str, dict[str, int]]],
    begin: date,
    end: date,
    platform: str,
    created: datetime,
) -> dict[str, Any]:
    """The IR of the `figures` counted for the months `begin`..`end` (first days of months),
    in the shape of COUNTER_SUSHI's JSON (Report_Header, Report_Items)."""
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
    for ibi, metrics in sorted(counted.items()):
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
