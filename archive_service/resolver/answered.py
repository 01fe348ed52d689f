"""Which Archives answered for an IBI: asked first next time, so that a resolution's cost does
not grow with the number of included Archives (issue 24).

After a round that asked every included Archive, the resolver remembers the Archives whose
answer was not empty (by their service IBI) for `answered_ttl` seconds. The next question
about that IBI goes to them alone; `resolve.resolve` falls back to all the others when their
answers do not satisfy it (see there). So an item that moved is found at once (its old Archive
answers empty), while an Archive that starts holding an IBI already remembered elsewhere is
asked only once the entry expires: the trade-off `answered_ttl` sets.

With them, the Archive whose claim of the IBI's Original stood (`owner`, resolve.py
`settle_claims`): a new claimant does not displace it, unless it is the IBI's naming
authority, while the entry lasts and OWNER_GRACE (a week) past its expiry: for an IBI no
included Archive names (OAI imports, items minted elsewhere) it is the only defence against a
hostile included Archive claiming every IBI, which at the entry's expiry won the next round
whenever it answered first (issue 30, ninth adversarial pass). An expired entry routes nothing
(the round asks every Archive) but gives its owner. Not for an IBI key longer than KEPT_KEY,
and a store keeps at most MAX_ROWS rows (stores/answered/). In a store the owner's key is the
one marked `!` in `holders`.

In memory per worker (bounded, least recently used dropped first), and behind it in a store
(resolver/stores/answered/): by default a SQLite file in `state_dir`, which the workers share
and which outlives a restart and the memory's bound (a claimant pushed out of the memory by
other IBIs, or forgotten by a restart, could be displaced by a new one: issue 30); with the
resolver's `database`, PostgreSQL (`resolver_answered`), so what one instance learned another
uses. A worker looks there on a miss in its memory and writes there after a round to all;
a hit in its memory (the hot path) does not touch the store.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable

from ..protocol import ibi as ibimod
from .stores.answered import Entry, kept_until, open_shared

log = logging.getLogger(__name__)

MAX_ENTRIES = 100_000  # per worker: an entry is ~500 bytes besides its IBI
# Characters of the IBIs kept, per worker: an IBI is 20-60, but one may run to the request
# line's 4 KB (a word or an IBIp of any length), and an included Archive answering for any
# IBI made each such resolution keep one: 10,000 took a worker from 38 to 107 MB, ~700 MB
# at MAX_ENTRIES (the seventh adversarial pass). Past it the least recently used go, as
# past MAX_ENTRIES: the store behind still has them.
MAX_CHARS = 64 * MAX_ENTRIES


class Answered:
    """IBI key -> (expiry, service IBI keys of the Archives that answered, the owner's)."""

    def __init__(
        self,
        ttl: float,
        database: str = "",
        state_dir: str | os.PathLike | None = None,
        clock: Callable[[], float] = time.time,
        max_entries: int = MAX_ENTRIES,
        max_chars: int = MAX_CHARS,
    ):
        self.ttl = ttl
        self.database = database
        self.clock = clock
        self.max_entries = max_entries
        self.max_chars = max_chars
        self._chars = 0  # of the keys in _entries
        self._lock = threading.Lock()
        self._entries: OrderedDict[str, Entry] = OrderedDict()
        self._counts = dict.fromkeys(("hits", "misses", "fallbacks", "full"), 0)
        # What other workers, instances and earlier runs learned: None when never remembered
        # (ttl 0) or with neither `database` nor `state_dir` (this worker's memory only).
        self._shared = open_shared(state_dir, database, clock) if ttl else None

    def count(self, what: str) -> None:
        with self._lock:
            self._counts[what] += 1

    def counts(self) -> dict[str, int]:
        with self._lock:
            return {**self._counts, "entries": len(self._entries)}

    def recall(self, ibi: str) -> frozenset[str] | None:
        """The service IBI keys remembered for `ibi` until its entry expires, or None; past
        that, an entry of use (`kept_until`: its owner) stays for `owner`, and the store is
        asked whether another worker learned more since."""
        if not self.ttl:
            return None
        key, now = ibimod.key(ibi), self.clock()
        with self._lock:
            found = self._entries.get(key)
            if found and found[0] > now:
                self._entries.move_to_end(key)
                return found[1]
            if found and kept_until(key, found) <= now:
                self._drop(key)
        if self._shared is not None:
            shared = self._shared.recall(key, now)
            if shared:
                self._keep(key, *shared)
                return shared[1] if shared[0] > now else None
        return None

    def owner(self, ibi: str) -> str | None:
        """The service IBI key of the Archive whose claim of the Original stood, as this
        worker holds it (`recall` first brings it from the store), OWNER_GRACE past the
        entry's expiry (`kept_until`)."""
        key = ibimod.key(ibi)
        with self._lock:
            found = self._entries.get(key)
        return found[2] if found and kept_until(key, found) > self.clock() else None

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
                self._drop(key)
        if self._shared is not None:
            self._shared.remember(key, expires, keys, owner)

    def _keep(self, key: str, expires: float, keys: frozenset[str], owner: str | None) -> None:
        with self._lock:
            if key not in self._entries:
                self._chars += len(key)
            self._entries[key] = (expires, keys, owner)
            self._entries.move_to_end(key)
            while len(self._entries) > self.max_entries or self._chars > self.max_chars:
                self._chars -= len(self._entries.popitem(last=False)[0])

    def _drop(self, key: str) -> None:
        """Forget `key` (under the lock)."""
        if self._entries.pop(key, None) is not None:
            self._chars -= len(key)
