"""Claims of an Original refused (resolve.py `settle_claims`): counted, logged once per IBI
and pair of Archives, the latest kept to be shown on `/health` and the home page.

Per worker process, in memory (bounded): what an admin needs is to see that an included
Archive claims other Archives' IBIs, and which, not a complete record.
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict, deque

from ..protocol import ibi as ibimod
from . import metrics
from .resolve import Conflict

log = logging.getLogger(__name__)

MAX_LOGGED = 10_000  # (IBI, Archive, Archive) already logged, the oldest forgotten first
SHOWN = 20  # the latest conflicts shown


class Conflicts:
    def __init__(self, shown: int = SHOWN, max_logged: int = MAX_LOGGED):
        self.max_logged = max_logged
        self._lock = threading.Lock()
        self._logged: OrderedDict[tuple[str, str, str], None] = OrderedDict()
        self._latest: deque[Conflict] = deque(maxlen=shown)
        self._refused = 0

    def __call__(self, conflict: Conflict) -> None:
        """Count a refused claim; log it the first time for this IBI and pair."""
        mark = (ibimod.key(conflict.ibi), conflict.taken, conflict.refused)
        with self._lock:
            self._refused += 1
            metrics.conflict()
            new = mark not in self._logged
            self._logged[mark] = None
            self._logged.move_to_end(mark)
            while len(self._logged) > self.max_logged:
                self._logged.popitem(last=False)
            if new:
                self._latest.appendleft(conflict)
        if new:
            log.warning(
                "conflicting claims of the Original of %s: %s refused, %s kept (%s)",
                conflict.ibi,
                conflict.refused,
                conflict.taken,
                conflict.why,
            )

    def latest(self) -> list[Conflict]:
        with self._lock:
            return list(self._latest)

    def counts(self) -> dict:
        """For /health: claims refused, distinct (IBI, pair) conflicts, the latest ones."""
        with self._lock:
            return {
                "refused": self._refused,
                "pairs": len(self._logged),
                "latest": [
                    {"ibi": c.ibi, "kept": c.taken, "refused": c.refused, "why": c.why}
                    for c in self._latest
                ],
            }
