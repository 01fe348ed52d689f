"""The acknowledgment statistics' report (`Statistics.report`) and its forms: CSV rows and a
table for people (`archive-service stats`)."""

from __future__ import annotations

from collections import Counter, defaultdict
from datetime import date
from typing import Any


def build_report(counts, rejected, since: date | None, top: int | None) -> dict[str, Any]:
    by_type: Counter = Counter()
    by_state: Counter = Counter()
    days: dict[str, Counter] = defaultdict(Counter)
    items: dict[str, Counter] = defaultdict(Counter)
    for day, ibi, contenttype, state, n in counts:
        by_type[contenttype] += n
        by_state[state] += n
        days[day]["count"] += n
        items[ibi]["count"] += n
        items[ibi][contenttype] += n
        items[ibi][state] += n
    reasons: Counter = Counter()
    for day, reason, n in rejected:
        reasons[reason] += n
        days[day]["rejected"] += n
    ranked = sorted(items.items(), key=lambda kv: (-kv[1]["count"], kv[0]))
    if top:
        ranked = ranked[:top]
    return {
        "since": since.isoformat() if since else None,
        "total": sum(by_type.values()),
        "rejected": sum(reasons.values()),
        "rejected_by_reason": dict(sorted(reasons.items())),
        "by_contenttype": dict(sorted(by_type.items())),
        "by_state": dict(sorted(by_state.items())),
        "days": [
            {"day": d, "count": c["count"], "rejected": c["rejected"]}
            for d, c in sorted(days.items())
        ],
        "items": [
            {
                "ibi": ibi,
                "count": c["count"],
                "by_contenttype": {k: c[k] for k in ("Data", "Metadata") if c[k]},
                "by_state": {k: c[k] for k in ("Original", "Copy") if c[k]},
            }
            for ibi, c in ranked
        ],
    }


def rows(report: dict[str, Any]) -> list[list[Any]]:
    """The report as CSV rows: kind, key, count (a flat form spreadsheets read)."""
    out: list[list[Any]] = [
        ["section", "key", "count"],
        ["total", "", report["total"]],
        ["rejected", "", report["rejected"]],
    ]
    out += [["rejected_by_reason", k, v] for k, v in report["rejected_by_reason"].items()]
    out += [["contenttype", k, v] for k, v in report["by_contenttype"].items()]
    out += [["state", k, v] for k, v in report["by_state"].items()]
    out += [["day", d["day"], d["count"]] for d in report["days"]]
    out += [["item", i["ibi"], i["count"]] for i in report["items"]]
    return out


def table(report: dict[str, Any]) -> str:
    """The report for people."""
    lines = [
        f"acknowledgments counted: {report['total']}"
        + (f" since {report['since']}" if report["since"] else "")
    ]
    reasons = ", ".join(f"{k} {v}" for k, v in report["rejected_by_reason"].items())
    lines.append(f"refused: {report['rejected']}" + (f" ({reasons})" if reasons else ""))
    for title, key in (("by contenttype", "by_contenttype"), ("by state", "by_state")):
        if report[key]:
            lines.append(f"{title}: " + ", ".join(f"{k} {v}" for k, v in report[key].items()))
    if report["days"]:
        lines += ["", f"{'day':<12}{'counted':>9}{'refused':>9}"]
        lines += [f"{d['day']:<12}{d['count']:>9}{d['rejected']:>9}" for d in report["days"]]
    if report["items"]:
        lines += ["", f"{'counted':>8} {'Data':>6} {'Meta':>6} {'Orig':>6} {'Copy':>6}  item"]
        for i in report["items"]:
            t, s = i["by_contenttype"], i["by_state"]
            lines.append(
                f"{i['count']:>8} {t.get('Data', 0):>6} {t.get('Metadata', 0):>6} "
                f"{s.get('Original', 0):>6} {s.get('Copy', 0):>6}  {i['ibi']}"
            )
    return "\n".join(lines)
