"""The COUNTER API (COUNTER_SUSHI) of Release 5.1, read-only, for the Item Report: what
`/r51/status`, `/r51/reports`, `/r51/reports/ir` and `/r51/members` answer (the routes are
create_app's, under the service path). No Flask here: each function takes the query's
parameters and returns (HTTP status, JSON value); docs/counter.md says what is answered.

Errors that stop a request are one Exception object with a non-200 status (Code of Practice
5.1, Appendix D): 1030 a required parameter missing (400), 2020 an api_key missing or wrong
(401), 3020 dates that are not dates or not in order (400). What the report differs in is an
Exception in its header, status 200: 3030 no usage, 3031 months not over yet, 3032 months
before the retention kept, 3050 parameters not recognized, 3060 a platform not this one's.
"""

from __future__ import annotations

import hmac
import re
from collections.abc import Callable, Mapping
from datetime import UTC, date, datetime, timedelta
from typing import Any

from ..stores.stats import counter
from .usage import add_months, in_range

RELEASE = "5.1"
KNOWN = frozenset(("customer_id", "requestor_id", "api_key", "platform", "begin_date", "end_date"))
MESSAGES = {
    1000: ("Service Not Available", 503),
    1030: ("Insufficient Information to Process Request", 400),
    2020: ("APIKey Invalid", 401),
    3020: ("Invalid Date Arguments", 400),
    3030: ("No Usage Available for Requested Dates", 200),
    3031: ("Usage Not Ready for Requested Dates", 200),
    3032: ("Usage No Longer Available for Requested Dates", 200),
    3050: ("Parameter Not Recognized in this Context", 200),
    3060: ("Invalid ReportFilter Value", 200),
}
DATE = re.compile(r"([0-9]{4})-([0-9]{2})(?:-([0-9]{2}))?")


def exception(code: int, data: str = "") -> dict[str, Any]:
    """One Exception of R5.1 (no Severity since 5.1)."""
    found = {"Code": code, "Message": MESSAGES[code][0]}
    if data:
        found["Data"] = data
    return found


class Refused(Exception):
    """A request the API cannot answer with a report: its one Exception and HTTP status."""

    def __init__(self, code: int, data: str):
        super().__init__(data)
        self.status = MESSAGES[code][1]
        self.body = exception(code, data)


def authorized(params: Mapping[str, str], key: str) -> None:
    """Raise Refused (2020) unless `key` is empty (public) or `params` give it as api_key;
    compared in constant time, so its characters cannot be guessed one by one."""
    if not key:
        return
    given = params.get("api_key", "")
    if not given:
        raise Refused(2020, "api_key is required: this Archive's usage reports are not public")
    if not hmac.compare_digest(given.encode("utf-8", "replace"), key.encode()):
        raise Refused(2020, "api_key is not the one this Archive's administrator gave out")


def allowed(params: Mapping[str, str], key: str) -> bool:
    """Whether usage may be shown to a request with `params`: the API's rule, for the
    statistics page too (one policy for the figures, issue 30)."""
    try:
        authorized(params, key)
    except Refused:
        return False
    return True


def month(params: Mapping[str, str], name: str) -> date:
    """The first day of the month the parameter `name` names (YYYY-MM or YYYY-MM-DD)."""
    text = params.get(name, "")
    if not text:
        raise Refused(1030, "begin_date and end_date are required (YYYY-MM or YYYY-MM-DD)")
    found = DATE.fullmatch(text)
    try:
        if found is None:
            raise ValueError
        year, number, day = found.groups()
        date(int(year), int(number), int(day or 1))
    except ValueError:
        raise Refused(3020, f"{name} {text[:30]!r} is not a date: YYYY-MM or YYYY-MM-DD") from None
    try:
        return in_range(date(int(year), int(number), 1), f"{name} {text!r}")
    except ValueError as exc:
        raise Refused(3020, str(exc)) from None


class Api:
    """The COUNTER API of one Archive: its store (`stats.Statistics`), platform (the service
    IBI), key (empty: public) and retention (days of uses kept, 0: all)."""

    def __init__(
        self,
        store: Any,
        platform: str,
        key: str = "",
        retention_days: int = 0,
        clock: Callable[[], float] = lambda: datetime.now(UTC).timestamp(),
        describe: Callable[[str], counter.Described] = counter.named_by_ibi,
    ):
        self.store, self.platform, self.key = store, platform, key
        self.retention_days, self.clock, self.describe = retention_days, clock, describe

    def _today(self) -> date:
        return datetime.fromtimestamp(self.clock(), UTC).date()

    def last_month(self) -> date:
        """The last month whose usage is complete: the one before this (UTC)."""
        return add_months(self._today().replace(day=1), -1)

    def first_month(self) -> date | None:
        """The first month whose uses are all kept, or None when none are deleted."""
        if not self.retention_days:
            return None
        return add_months((self._today() - timedelta(days=self.retention_days)).replace(day=1), 1)

    def status(self) -> tuple[int, Any]:
        """/r51/status: public, as the Code requires."""
        problem = self.store.problem
        alerts = [{"Date_Time": _now(self.clock), "Alert": problem}] if problem else []
        return 200, [
            {
                "Description": f"COUNTER API of the Archive {self.platform} (Item Report)",
                "Service_Active": True,
                "Registry_Record": "",
                "Alerts": alerts,
            }
        ]

    def reports(self, params: Mapping[str, str], path: str) -> tuple[int, Any]:
        """/r51/reports: the one report offered, with the months it has."""
        authorized(params, self.key)
        entry = {
            "Report_Name": "Item Report",
            "Report_ID": "IR",
            "Release": RELEASE,
            "Report_Description": "Uses of each item (investigations and requests) by month",
            "Path": path,
            "Last_Month_Available": self.last_month().strftime("%Y-%m"),
        }
        first = self.first_month()
        if first is not None:
            entry["First_Month_Available"] = first.strftime("%Y-%m")
        return 200, [entry]

    def members(self, params: Mapping[str, str]) -> tuple[int, Any]:
        """/r51/members: no consortium here; the one customer every report is of."""
        authorized(params, self.key)
        return 200, [
            {
                "Customer_ID": params.get("customer_id", ""),
                "Name": "The World",
                "Notes": "Reports of this Archive are global: usage is not attributed to "
                "institutions",
            }
        ]

    def item_report(self, params: Mapping[str, str]) -> tuple[int, Any]:
        """/r51/reports/ir: the Item Report of the months from begin_date to end_date, with
        the Exceptions its header must carry."""
        authorized(params, self.key)
        begin, end = month(params, "begin_date"), month(params, "end_date")
        if begin > end:
            raise Refused(3020, "begin_date is after end_date")
        found = []
        unknown = sorted(name for name in params if name not in KNOWN)
        if unknown:
            found.append(exception(3050, "not recognized, ignored: " + ", ".join(unknown)))
        platform = params.get("platform", "")
        if platform and platform != self.platform:
            wrong = f"platform {platform[:100]!r}: this one is {self.platform}"
            found.append(exception(3060, wrong))
        last, first = self.last_month(), self.first_month()
        shown_end = min(end, last)
        if end > last:
            later = max(begin, add_months(last, 1))
            span = f"{later:%Y-%m}" if later == end else f"{later:%Y-%m} to {end:%Y-%m}"
            found.append(exception(3031, "not over yet: " + span))
        if first is not None and begin < first:
            kept = f"uses are kept {self.retention_days} days: complete from {first:%Y-%m}"
            found.append(exception(3032, kept))
        if begin <= shown_end and not any(e["Code"] == 3060 for e in found):
            report = counter.sushi(
                self.store.item_report(begin, shown_end, self.platform, describe=self.describe)
            )
            if not report["Report_Items"]:
                found.append(exception(3030, f"no use from {begin:%Y-%m} to {shown_end:%Y-%m}"))
        else:  # nothing that can be reported: the header alone
            now = datetime.fromtimestamp(self.clock(), UTC)
            report = counter.sushi(counter.item_report({}, begin, end, self.platform, now))
        report["Report_Header"]["Exceptions"] = list(report["Report_Header"].get("Exceptions", []))
        report["Report_Header"]["Exceptions"] += found
        return 200, report


def _now(clock: Callable[[], float]) -> str:
    return datetime.fromtimestamp(clock(), UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
