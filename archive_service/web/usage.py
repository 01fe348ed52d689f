"""What the statistics page shows of the COUNTER figures (docs/counter.md): a month's four
metric types summed over the items, its top items, requests per day (30 days) and per month
(12 months), and the bar charts of those, drawn here as SVG (no JavaScript, no library).

The figures are the store's (`Statistics.item_report` for months, `Statistics.day_figures`
for days): the Code's rules live in stores/stats/counter.py, not here. Past days and months
do not change (a day's users are its own: the salt of the day), so each process keeps what it
counted of them and counts the day and month still going on again at most once a minute.

Why not pygal (a maintained library for SVG charts, LGPL-3.0+, 3.1.3 of 2026-06): its SVG
always carries an inline `<script>` with the chart's settings, a `<title>Pygal</title>` and a
`<desc>` of coordinates per bar that a screen reader reads out, and fresh random ids on every
rendering (23 KB for 30 bars); taking those out again is more code than drawing the bars.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from typing import Any

from babel.dates import format_skeleton
from flask_babel import get_locale

from ..stores.stats import counter

DAYS = 30  # the chart of requests per day
MONTHS = 12  # the chart of requests per month
TOP = 10  # items in the month's top list
SETTLED = 120  # seconds after a day ends before its figures are kept (uses written late)
FRESH = 60  # seconds the figures of today and this month are shown again before a recount


def month_of(text: str) -> date:
    """The first day of the month `text` names (YYYY-MM); ValueError saying what is wrong."""
    try:
        month = datetime.strptime(text, "%Y-%m").date()
    except ValueError:
        raise ValueError(f"month {text[:20]!r} is not a month such as 2026-01 (YYYY-MM)") from None
    return in_range(month, f"month {text!r}")


def in_range(month: date, what: str) -> date:
    """`month`, unless no use can be in it: ValueError saying so of `what`. (Before the epoch
    no use was recorded; the pages and reports reach a year back and a month ahead, and
    date's years end at 9999.)"""
    if not 1970 <= month.year <= 9998:
        raise ValueError(f"{what} is not one from 1970-01 to 9998-12")
    return month


def add_months(month: date, n: int) -> date:
    """The first day of the month `n` months after `month`'s (before it when `n` < 0)."""
    index = month.year * 12 + month.month - 1 + n
    return date(index // 12, index % 12 + 1, 1)


def _start(day: date) -> float:
    return datetime(day.year, day.month, day.day, tzinfo=UTC).timestamp()


def _totals(report: dict[str, Any], month: str) -> tuple[dict[str, int], list[dict[str, Any]], int]:
    """The month's four metric types summed over the items, its TOP items (most requests,
    then investigations) and how many items it has, of an IR."""
    totals = dict.fromkeys(counter.METRIC_TYPES, 0)
    items = []
    for item in report["Report_Items"]:
        own = dict.fromkeys(counter.METRIC_TYPES, 0)
        for attributes in item["Attribute_Performance"]:
            for metric, by_month in attributes["Performance"].items():
                if metric in own:
                    own[metric] += by_month.get(month, 0)
        if any(own.values()):
            items.append({"ibi": item["Item"], **own})
        for metric, n in own.items():
            totals[metric] += n
    items.sort(key=lambda i: (-i["Total_Item_Requests"], -i["Total_Item_Investigations"]))
    return totals, items[:TOP], len(items)


@dataclass
class Usage:
    """The COUNTER figures of one Archive's store (`stats.Statistics`) for its pages."""

    store: Any  # stats.Statistics
    platform: str
    clock: Callable[[], float] = time.time

    def __post_init__(self) -> None:
        self._kept: dict[tuple[str, date], Any] = {}
        self._recent: dict[tuple[str, date], tuple[float, Any]] = {}
        self._lock = threading.Lock()

    def _remember(self, key: tuple[str, date], end: float, make: Callable[[], Any]) -> Any:
        # A past period for good; today and this month for FRESH seconds: a month of a
        # million uses takes seconds to count, and a page is viewed more often than that.
        now = self.clock()
        with self._lock:
            if key in self._kept:
                return self._kept[key]
            made, value = self._recent.get(key, (0.0, None))
            if now - made < FRESH:
                return value
        value = make()
        with self._lock:
            if now < end + SETTLED:
                self._recent = {k: v for k, v in self._recent.items() if now - v[0] < FRESH}
                self._recent[key] = (now, value)
                return value
            self._kept[key] = value
            if len(self._kept) > 4 * (DAYS + MONTHS):  # months of page views: drop the oldest
                for old in sorted(self._kept, key=lambda k: k[1])[: DAYS + MONTHS]:
                    del self._kept[old]
        return value

    def month(self, first: date) -> tuple[dict[str, int], list[dict[str, Any]], int]:
        """The month's totals per metric type, its top items and their number (`_totals`).
        Kept as such, not as the month's Item Report: that is ~1.8 KB an item used, and a
        page asks 12 months (20,000 items used a month: 437 MB a process, issue 30)."""
        month = first.strftime("%Y-%m")
        return self._remember(
            ("month", first),
            _start(add_months(first, 1)),
            lambda: _totals(self.store.item_report(first, first, self.platform), month),
        )

    def day_requests(self, day: date) -> int:
        """Total_Item_Requests of all items on the UTC `day` (kept as that number alone)."""
        return self._remember(
            ("day", day),
            _start(day + timedelta(days=1)),
            lambda: sum(
                f.get("Total_Item_Requests", 0) for f in self.store.day_figures(day).values()
            ),
        )

    def acknowledged(self, since: date, top: int) -> dict[str, Any]:
        """The acknowledgments counted from `since` on (`Statistics.report`), read again at
        most every FRESH seconds: it reads every (day, item) counted since, 1.3-1.7 s of CPU
        a view at 10,000 items acknowledged a day, where a page takes milliseconds."""
        now = self.clock()
        return self._remember(
            ("acknowledged", since, top),
            now + FRESH,
            lambda: self.store.report(since=since, top=top),
        )

    def page(self, first: date) -> dict[str, Any]:
        """What the statistics page shows for the month starting on `first`: its totals and
        top items, and the series of the two charts (30 days up to the month's last day or
        today, 12 months up to the month)."""
        today = datetime.fromtimestamp(self.clock(), UTC).date()
        totals, top, count = self.month(first)
        last = min(counter.month_end(first), today)
        days = [last - timedelta(days=n) for n in range(DAYS - 1, -1, -1)]
        months = [add_months(first, n) for n in range(1 - MONTHS, 1)]
        return {
            "month": first.strftime("%Y-%m"),
            "totals": totals,
            "top": top,
            "items": count,
            "days": [(d.isoformat(), self.day_requests(d)) for d in days],
            "months": [
                (m.strftime("%Y-%m"), self.month(m)[0]["Total_Item_Requests"]) for m in months
            ],
        }


@dataclass(frozen=True)
class Bar:
    x: float
    y: float
    width: float
    height: float
    label: str
    value: int
    short: str  # written under the axis, or empty


def day_label(day: str) -> str:
    """'Jan 5' of 2026-01-05 in the page's language (pt-BR '5 de jan.'): short enough for
    every 7th bar of 30 at a phone's width."""
    return format_skeleton("MMMd", date.fromisoformat(day), locale=get_locale() or "en")


def month_label(month: str) -> str:
    """'Jan ’26' of 2026-01 in the page's language (pt-BR 'jan. de 2026')."""
    return format_skeleton("MMMyy", date.fromisoformat(month + "-01"), locale=get_locale() or "en")


def chart(series: list[tuple[str, int]], every: int, short: Callable[[str], str]) -> dict:
    """The geometry of a bar chart of `series` (label, value) in a 360 x 200 viewBox (a
    phone's width, so that its text is read at its size there): bars, y axis ticks at 0, half
    and the top, and every `every`th label written under its bar as `short(label)`."""
    width, height, left, right, bottom, top = 360, 200, 34, 18, 22, 10
    peak = max((v for _, v in series), default=0)
    scale = max(2, peak + (-peak % 2))  # even, so that its half is a whole number
    plot_w, plot_h = width - left - right, height - bottom - top
    step = plot_w / max(1, len(series))
    bars = []
    for i, (label, value) in enumerate(series):
        h = plot_h * value / scale
        bars.append(
            Bar(
                x=round(left + i * step + step * 0.15, 2),
                y=round(top + plot_h - h, 2),
                width=round(step * 0.7, 2),
                height=round(h, 2),
                label=label,
                value=value,
                short=short(label) if (len(series) - 1 - i) % every == 0 else "",
            )
        )
    ticks = [(round(top + plot_h - plot_h * t / scale, 2), t) for t in (0, scale // 2, scale)]
    return {
        "width": width,
        "height": height,
        "left": left,
        "base": top + plot_h,
        "right": width - right,
        "bars": bars,
        "ticks": ticks,
        "label_y": height - 6,
    }
