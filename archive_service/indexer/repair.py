"""The indexer's repair after an inotify queue overflow (issue 35): the kernel dropped the
events of a while, so what changed then is looked for (index/changed.py: ctimes against the
moment the events were last whole, not a read of the tree) and only that is refreshed, as if
its events had been heard; the directories made meanwhile are watched."""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING

from ..index import changed

if TYPE_CHECKING:
    from .watch import Indexer

log = logging.getLogger(__name__)


def may_repair(indexer: Indexer, watching: bool) -> bool:
    """Whether the index held all that the events before the overflow told of (a refresh of
    the indexer's ended, and no write failed since) and our own layer watches (watchdog's
    says nothing of when it overflowed): else everything is rescanned."""
    return watching and indexer._watches is not None and indexer._kept and indexer._retry_at is None


def repair(indexer: Indexer, since: int, scopes: set[str]) -> None:
    """Refresh what changed at or after `since` (ns), and `scopes` (heard before it); watch
    the directories made meanwhile. If the look fails, rescan everything."""
    from .watch import OVERFLOW

    started = time.monotonic()
    try:
        places = changed.changed_since(indexer.store, since)
    except Exception:  # noqa: BLE001 - never let it stop the index: the walk still can
        log.exception("looking for what changed in %s during an overflow", indexer.store.root)
        indexer._rescan(OVERFLOW, True)
        return
    result = indexer._refresh(scopes | set(places), "repairing an overflow")
    if result is None:
        return  # _refresh said why, and rescans everything RETRY_SECONDS later
    indexer._grow_watches(indexer._watch_new_rows)
    log.info(
        "%s: repaired in %.1f s (%d changed place(s) since its events were last whole): %s",
        OVERFLOW,
        time.monotonic() - started,
        len(places),
        result,
    )
