"""Which Archives answered for an IBI: asked first next time, so that a resolution's cost does
not grow with the number of included Archives (issue 24).

After a round that asked every included Archive, the resolver remembers the Archives whose
answer was not empty (by their service IBI) for `answered_ttl` seconds. The next question
about that IBI goes to them alone; `resolve.resolve` falls back to all the others when their
answers do not satisfy it (see there). So an item that moved is found at once (its old Archive
answers empty), while an Archive that starts holding an IBI already remembered elsewhere is
asked only once the entry expires: the trade-off `answered_ttl` sets.

With them, the Archive whose claim of the IBI's Original stood (`owner`, resolve.py
`settle_claims`): a new claimant does not displace it while the entry lasts, unless it is the
IBI's naming authority. In PostgreSQL its key is the one marked `!` in `holders`.

In memory per worker (bounded, least recently used dropped first); with the resolver's
`database`, also in PostgreSQL (`resolver_answered`), so what one instance learned another
uses: a worker looks there on a miss in its memory and writes there after a round to all.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable

from ..common import postgres
from ..protocol import ibi as ibimod

log = logging.getLogger(__name__)

MAX_ENTRIES = 100_000  # per worker: an entry is ~200 bytes


OWNER = "!"  # marks the owner's key among the holders kept in PostgreSQL (no IBI has it)

Entry = tuple[float, frozenset[str], str | None]  # expiry, holders, owner


class Answered:
    """IBI key -> (expiry, service IBI keys of the Archives that answered, the owner's)."""

    def __init__(
        self,
        ttl: float,
        database: str = "",
        clock: Callable[[], float] = time.time,
        max_entries: int = MAX_ENTRIES,
    ):
        self.ttl = ttl
        self.database = database
        self.clock = clock
        self.max_entries = max_entries
        self._lock = threading.Lock()
        self._entries: OrderedDict[str, Entry] = OrderedDict()
        self._counts = dict.fromkeys(("hits", "misses", "fallbacks", "full"), 0)
        self._writes = 0

    def count(self, what: str) -> None:
        with self._lock:
            self._counts[what] += 1

    def counts(self) -> dict[str, int]:
        with self._lock:
            return {**self._counts, "entries": len(self._entries)}

    def recall(self, ibi: str) -> frozenset[str] | None:
        """The service IBI keys remembered for `ibi`, or None."""
        if not self.ttl:
            return None
        key, now = ibimod.key(ibi), self.clock()
        with self._lock:
            found = self._entries.get(key)
            if found and found[0] > now:
                self._entries.move_to_end(key)
                return found[1]
            self._entries.pop(key, None)
        if self.database:
            shared = self._shared_recall(key, now)
            if shared:
                self._keep(key, *shared)
                return shared[1]
        return None

    def owner(self, ibi: str) -> str | None:
        """The service IBI key of the Archive whose claim of the Original stood, as this
        worker holds it (`recall` first brings it from PostgreSQL)."""
        with self._lock:
            found = self._entries.get(ibimod.key(ibi))
        return found[2] if found and found[0] > self.clock() else None

    def remember(self, ibi: str, holders: Iterable[str], owner: str | None = None) -> None:
        """After a round to every included Archive: those whose answer was not empty
        (none: forget the IBI), and the owner (`settle_claims`)."""
        if not self.ttl:
            return
        key = ibimod.key(ibi)
        keys = frozenset(ibimod.key(h) for h in holders)
        owner = ibimod.key(owner) if owner else None
        expires = self.clock() + self.ttl
        if keys:
            self._keep(key, expires, keys, owner)
        else:
            with self._lock:
                self._entries.pop(key, None)
        if self.database:
            self._shared_remember(key, expires, keys, owner)

    def _keep(self, key: str, expires: float, keys: frozenset[str], owner: str | None) -> None:
        with self._lock:
            self._entries[key] = (expires, keys, owner)
            self._entries.move_to_end(key)
            while len(self._entries) > self.max_entries:
                self._entries.popitem(last=False)

    # -- PostgreSQL (common/postgres.py SCHEMA["resolver"]) ------------------------------

    def _shared_recall(self, key: str, now: float) -> Entry | None:
        try:
            with postgres.transaction(self.database, timeout=1) as conn:
                row = conn.execute(
                    "SELECT expires, holders FROM resolver_answered WHERE ibikey = %s "
                    "AND expires > %s",
                    (key, now),
                ).fetchone()
        except Exception as exc:  # the database down: resolve without it, asking all
            log.warning("answered Archives: cannot read %s: %s", self.database_shown, exc)
            return None
        if not row:
            return None
        words = row[1].split()
        owner = next((w[1:] for w in words if w.startswith(OWNER)), None)
        return row[0], frozenset(w.removeprefix(OWNER) for w in words), owner

    def _shared_remember(
        self, key: str, expires: float, keys: frozenset[str], owner: str | None
    ) -> None:
        with self._lock:
            self._writes += 1
            sweep = self._writes % 1000 == 1
        try:
            with postgres.autocommit(self.database, timeout=1) as conn:
                if keys:
                    conn.execute(
                        "INSERT INTO resolver_answered (ibikey, holders, expires) "
                        "VALUES (%s, %s, %s) ON CONFLICT (ibikey) DO UPDATE SET "
                        "holders = excluded.holders, expires = excluded.expires",
                        (key, " ".join(OWNER * (k == owner) + k for k in sorted(keys)), expires),
                    )
                else:
                    conn.execute("DELETE FROM resolver_answered WHERE ibikey = %s", (key,))
                if sweep:  # now and then, what has expired goes
                    conn.execute(
                        "DELETE FROM resolver_answered WHERE expires < %s", (self.clock(),)
                    )
        except Exception as exc:
            log.warning("answered Archives: cannot write %s: %s", self.database_shown, exc)

    @property
    def database_shown(self) -> str:
        return postgres.redacted(self.database)
