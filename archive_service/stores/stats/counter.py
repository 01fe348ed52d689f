"""COUNTER Code of Practice Release 5.1: from recorded uses to the Item Report (IR).

What is recorded (stores/stats/ `Statistics.record_use`) is one row per use: its time, the item,
whether it was an investigation or a request, the content type, a `user` (a hash of client
address and User-Agent under a salt that lives one UTC day, never the address itself) and
whether the User-Agent is on the COUNTER robots list. This module holds the Code's rules over
those rows, as one SQL query each store runs per UTC day (`month_query`; a month adds up
its days, stores/stats/), and the report's
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

import unicodedata
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, date, datetime
from typing import Any

DOUBLE_CLICK = 30  # seconds: two uses this close or closer count once
REQUEST, INVESTIGATION = "request", "investigation"
# Access_Type (R5.1 §3.3.7), as the item was at the time of the use: an item behind access
# rules (its sidecar's `access: networks`, a licensed item) is Controlled, any other Open.
OPEN, CONTROLLED = "Open", "Controlled"
# Of an IR's optional columns, those this report shows (listed in Report_Attributes).
ATTRIBUTES_TO_SHOW = ("YOP", "Access_Type", "Access_Method")
WORLD = "0000000000000000"  # the Institution_ID of a report to "The World" (R5.1 §3.2.1)
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


# R5.1's Data_Type values (Code §3.3.2) an item's `dc:type` is mapped onto: each is named by
# the words (English, Portuguese, DCMI Type Vocabulary, COAR/info:eu-repo's last segment) a
# type may hold, lower case without accents. Checked in order: the first whose word a type
# holds wins ("conference paper" is a Conference_Item before an Article).
DATA_TYPES = (
    ("Thesis_or_Dissertation", ("thesis", "dissertation", "doctoralthesis", "masterthesis",
                                "bachelorthesis", "tese", "dissertacao", "monografia", "tcc")),
    ("Conference_Item", ("conferencepaper", "conference paper", "conferenceobject",
                         "conferenceposter", "conference item", "artigo em evento",
                         "trabalho em evento", "proceedings paper")),
    ("Conference", ("conference", "proceedings", "congresso", "anais", "evento")),
    ("Book_Segment", ("bookpart", "book part", "book chapter", "chapter", "capitulo")),
    ("Book", ("book", "livro", "monograph")),
    ("Article", ("article", "artigo", "journal paper", "preprint", "review")),
    ("Report", ("report", "relatorio", "technical note", "nota tecnica", "workingpaper",
                "working paper")),
    ("Dataset", ("dataset", "data set", "conjunto de dados", "dados")),
    ("Software", ("software", "programa de computador")),
    ("Image", ("image", "stillimage", "imagem", "figura", "mapa", "map", "photograph")),
    ("Audiovisual", ("movingimage", "video", "audiovisual", "filme")),
    ("Sound", ("sound", "audio", "som")),
    ("Patent", ("patent", "patente")),
    ("Standard", ("standard", "norma")),
    ("Interactive_Resource", ("interactiveresource", "interactive resource")),
    ("Multimedia", ("multimedia", "multimidia")),
    ("News_Item", ("news", "noticia")),
    ("Journal", ("journal", "periodical", "revista", "periodico")),
)  # fmt: skip
UNSPECIFIED, OTHER = "Unspecified", "Other"  # no type given; a type that maps onto none
YOP_UNKNOWN = "0001"  # as the Code spells an unknown year of publication


@dataclass(frozen=True)
class Described:
    """What an IR says of an item beyond its figures: its title (the IBI when it has none),
    publisher, year of publication, Data_Type and URI (its persistent URL, or empty)."""

    title: str
    publisher: str = ""
    yop: str = YOP_UNKNOWN
    data_type: str = UNSPECIFIED
    uri: str = ""


def data_type(types: Iterable[str]) -> str:
    """The Data_Type of an item whose `dc:type` values are `types`."""
    given = [_folded(t) for t in types if t.strip()]
    for name, words in DATA_TYPES:
        if any(word in t for t in given for word in words):
            return name
    return OTHER if given else UNSPECIFIED


def year_of_publication(dates: Iterable[str]) -> str:
    """The year of the first `dc:date` that begins with one (YYYY, 1000-9999)."""
    for text in dates:
        year = text.strip()[:4]
        if len(year) == 4 and year.isdigit() and year >= "1000":
            return year
    return YOP_UNKNOWN


def describe_item(ibi: str, dc: dict[str, list[str]] | None, uri: str | None) -> Described:
    """The IR's description of the item `ibi` from its Dublin Core (None: none given)."""
    dc = dc or {}

    def first(name: str) -> str:
        return next((v.strip() for v in dc.get(name, ()) if v.strip()), "")

    return Described(
        title=first("title") or ibi,
        publisher=first("publisher"),
        yop=year_of_publication(dc.get("date", ())),
        data_type=data_type(dc.get("type", ())),
        uri=uri or "",
    )


def describer(
    lookup: Callable[[str], Any], persistent_url: Callable[[str], str | None]
) -> Callable[[str], Described]:
    """`describe` for `item_report` from a catalog's `lookup` (an `Item` with its `dc`, or
    None for an item no longer held) and the rule of the persistent URL."""

    def describe(ibi: str) -> Described:
        item = lookup(ibi)
        return describe_item(ibi, item.dc if item else None, persistent_url(ibi))

    return describe


def _folded(text: str) -> str:
    decomposed = unicodedata.normalize("NFKD", text.casefold())
    return "".join(c for c in decomposed if not unicodedata.combining(c))


def named_by_ibi(ibi: str) -> Described:
    """The description of an item nothing more is known of: its IBI."""
    return Described(ibi)


@dataclass(frozen=True)
class Use:
    """One recorded use, as a store reads it back."""

    time: float
    ibi: str
    kind: str  # REQUEST or INVESTIGATION
    user: str
    robot: bool


def access_type(networks: tuple) -> str:
    """The Access_Type of a use of an item whose files are served only inside `networks`
    (empty: to anyone)."""
    return CONTROLLED if networks else OPEN


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
    item and Access_Type the four metric types, a request also an investigation, unique per
    session (user and hour). In the database: a month of a million uses is not a million
    Python objects."""
    return f"""
WITH w AS (
    SELECT ibi, kind, access, {user} AS u, t,
        LEAD(t) OVER (PARTITION BY {user}, ibi, kind ORDER BY t) AS next
    FROM {table} WHERE t >= {param} AND t < {param} AND NOT robot
), kept AS (
    SELECT ibi, kind, access, u || ':' || {hour} AS session FROM w
    WHERE next IS NULL OR next - t > {DOUBLE_CLICK}
)
SELECT ibi, access, count(*), count(DISTINCT session),
    sum(CASE WHEN kind = '{REQUEST}' THEN 1 ELSE 0 END),
    count(DISTINCT CASE WHEN kind = '{REQUEST}' THEN session END)
FROM kept GROUP BY ibi, access
"""


def figures(
    months_rows: dict[str, Iterable[tuple]],
) -> dict[str, dict[str, dict[str, dict[str, int]]]]:
    """{ibi: {Access_Type: {metric type: {YYYY-MM: n}}}} from each month's rows of
    `month_query` (ibi, Access_Type, the four counts)."""
    out: dict[str, dict[str, dict[str, dict[str, int]]]] = defaultdict(
        lambda: defaultdict(lambda: {m: {} for m in METRIC_TYPES})
    )
    for month, found in months_rows.items():
        for ibi, access, *counts in found:
            for metric, n in zip(METRIC_TYPES, counts, strict=True):
                if n:
                    out[ibi][access][metric][month] = int(n)
    return out


def item_report(
    counted: dict[str, dict[str, dict[str, dict[str, int]]]],
    begin: date,
    end: date,
    platform: str,
    created: datetime,
    describe: Callable[[str], Described] = named_by_ibi,
) -> dict[str, Any]:
    """The IR of the `figures` counted for the months `begin`..`end` (first days of months):
    COUNTER_SUSHI's Report_Header, and Report_Items one per item (`sushi` nests them as the
    API does), each with an Attribute_Performance per Access_Type it was used under, and
    what `describe(ibi)` says of it (the IBI alone by default: an item no longer held)."""
    last = month_end(end)
    header = {
        "Report_Name": "Item Report",
        "Report_ID": "IR",
        "Release": "5.1",
        "Institution_Name": "The World",
        # A global report: the platform as namespace, sixteen zeros (R5.1 §3.2.1).
        "Institution_ID": {platform: [WORLD]},
        "Report_Filters": {
            "Begin_Date": begin.isoformat(),
            "End_Date": last.isoformat(),
            "Access_Method": ["Regular"],
            "Metric_Type": list(METRIC_TYPES),
        },
        "Report_Attributes": {"Attributes_To_Show": list(ATTRIBUTES_TO_SHOW)},
        "Exceptions": [],
        "Created": created.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "Created_By": platform,
        "Registry_Record": "",
    }
    items = []
    for ibi, by_access in sorted(counted.items()):
        described = describe(ibi)
        attributes = []
        for access, metrics in sorted(by_access.items()):
            performance = {m: dict(sorted(metrics[m].items())) for m in METRIC_TYPES if metrics[m]}
            if performance:
                attributes.append(
                    {
                        "Data_Type": described.data_type,
                        "YOP": described.yop,
                        "Access_Type": access,
                        "Access_Method": "Regular",
                        "Performance": performance,
                    }
                )
        if attributes:
            item_id = {"Proprietary": f"{platform}:{ibi}"}
            if described.uri:
                item_id["URI"] = described.uri
            items.append(
                {
                    "Item": described.title,
                    "Item_ID": item_id,
                    "Platform": platform,
                    "Publisher": described.publisher,
                    "Attribute_Performance": attributes,
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
        "Institution_ID": "; ".join(
            f"{namespace}:{value}"
            for namespace, values in head["Institution_ID"].items()
            for value in values[:1]  # one value per namespace in the tabular form
        ),
        "Metric_Types": "; ".join(filters["Metric_Type"]),
        "Report_Filters": "Access_Method=" + "|".join(filters["Access_Method"]),
        "Report_Attributes": "; ".join(
            f"{name}={'|'.join(value) if isinstance(value, list) else value}"
            for name, value in head["Report_Attributes"].items()
        ),
        "Exceptions": "; ".join(
            f"{e['Code']}: {e['Message']}" + (f" ({e['Data']})" if e.get("Data") else "")
            for e in head["Exceptions"]
        ),
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
                        item["Item_ID"].get("URI", ""),
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
    """The IR as COUNTER_SUSHI R5.1's JSON: an item without a parent sits in the `Items` of
    one Report_Item with no parent details; no empty Exceptions, no month list."""
    header = {k: v for k, v in report["Report_Header"].items() if v != []}
    items = report["Report_Items"]
    return {"Report_Header": header, "Report_Items": [{"Items": items}] if items else []}
