"""Progress of long work (imports, `index`, the first index build, `check --links`): how many
done, the rate and the time left, figured one way (`figures`, `duration`), shown as a bar
redrawn on a terminal (`Bar`; `on_terminal` gives none when stderr is not one, so a cron
job's mail or a pipe gets nothing extra) or, while `serve` builds its index, as a log line
every few seconds (index/store.py `Progress`)."""

from __future__ import annotations

import sys
import time
from typing import TextIO


def figures(done: int, total: int | None, started: float, now: float) -> tuple[float, float]:
    """The rate (per second) since `started`, and the seconds left at it (0 without `total`)."""
    rate = done / max(now - started, 1e-9)
    left = (max(total, done) - done) / rate if total is not None and rate else 0.0
    return rate, left


def duration(seconds: float) -> str:
    seconds = int(seconds + 0.5)
    if seconds < 60:
        return f"{seconds} s"
    if seconds < 3600:
        return f"{seconds // 60} min {seconds % 60} s"
    return f"{seconds // 3600} h {seconds % 3600 // 60} min"


class Bar:
    """A one-line progress bar (`done/total`, rate, time left), redrawn at most five times a
    second, and once more, with the final figures, by `close`."""

    def __init__(self, stream: TextIO = sys.stderr, label: str = "import"):
        self.stream, self.label = stream, label
        self.started = self.shown = time.monotonic()
        self.drawn = False
        self.last: tuple[int, int | None] | None = None

    def __call__(self, done: int, total: int | None) -> None:
        """`total` None: not known (a streamed import), the count and the rate only."""
        self.last = (done, total)
        now = time.monotonic()
        if (total is None or done < total) and now - self.shown < 0.2:
            return
        self.shown = now
        self._draw(done, total, now)

    def _draw(self, done: int, total: int | None, now: float) -> None:
        rate, left = figures(done, total, self.started, now)
        if total is None:
            self.stream.write(f"\r{self.label} {done} {rate:.0f}/s ")
        else:
            total = max(total, done)  # an estimate (a first build's) may fall short
            width = 30
            filled = width * done // max(total, 1)
            self.stream.write(
                f"\r{self.label} [{'#' * filled}{'.' * (width - filled)}] {done}/{total} "
                f"{rate:.0f}/s, {duration(left)} left "
            )
        self.stream.flush()
        self.drawn = True

    def close(self) -> None:
        if self.last is not None and self.last[0] and not self.drawn:
            self._draw(*self.last, time.monotonic())  # work shorter than one redraw
        if self.drawn:
            self.stream.write("\n")
            self.stream.flush()


def on_terminal(label: str, stream: TextIO | None = None) -> Bar | None:
    """A bar on `stream` (stderr) when it is a terminal, else None: nothing is shown."""
    stream = sys.stderr if stream is None else stream
    return Bar(stream, label) if stream.isatty() else None
