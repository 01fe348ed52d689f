"""A blocking call waited for at most so long: for clients whose library times out each read
but not the whole exchange (urllib, httpx), where a server sending a byte now and then held
the caller for as long as it liked."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


class Overdue(Exception):
    """The call had not ended when its time was up; it goes on in its thread, abandoned."""


def call_within(seconds: float, call: Callable[[], T], name: str) -> T:
    """`call()`'s result (or its exception, raised here) if it ends within `seconds`, else
    Overdue. It runs in a daemon thread named `name`: one left behind ends when its own
    per-read timeout fires (or with the process), and never holds the caller."""
    outcome: list[tuple[T | None, BaseException | None]] = []

    def run() -> None:
        try:
            outcome.append((call(), None))
        except BaseException as exc:  # noqa: BLE001 (raised again below, in the caller)
            outcome.append((None, exc))

    worker = threading.Thread(target=run, name=name, daemon=True)
    worker.start()
    worker.join(seconds)
    if not outcome:
        raise Overdue(f"not ended within {seconds:g} s")
    result, error = outcome[0]
    if error is not None:
        raise error
    return result  # type: ignore[return-value]
