"""How pages show a size and a date: one function each (a locale-aware version replaces
them in one place)."""

from __future__ import annotations

from datetime import datetime

_UNITS = ("bytes", "KB", "MB", "GB", "TB")


def size_text(size: int) -> str:
    """A file size for people: 1 decimal past a kilobyte (1000-based, as file managers)."""
    value, unit = float(size), 0
    while value >= 1000 and unit < len(_UNITS) - 1:
        value, unit = value / 1000, unit + 1
    return f"{size} bytes" if unit == 0 else f"{value:.1f} {_UNITS[unit]}"


def date_text(moment: datetime) -> str:
    """A date and time for people, in UTC."""
    return moment.strftime("%Y-%m-%d %H:%M UTC")
