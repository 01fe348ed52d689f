"""Putting a new item into the collection, and taking one out as Deleted (SPEC §7, issue 5).

deposit: mint an IBI, build the whole item — `doc/` and `item.yaml` — in a dot-named
temporary directory of the collection (the index walker skips dot-directories, so a deposit
cut short leaves nothing an index can see), then rename it into place in one step. Relations
(`nextedition`, `translations`) are written into the other item's sidecar through
`sidecar_update`, staged before the rename and committed right after it.

delete: the item stays, as a Deleted tombstone (state Deleted, timestamp = time of removal);
its files are moved from `doc/` to `.deleted-doc-<time>/` inside the item: nothing is
removed, and nothing under a Deleted item is served any longer (files are only served from
`doc/`; the web layer also refuses Deleted items).

Deposits and deletions hold `<state_dir>/deposit.lock`, so two of them never interleave
their reads and writes of the same sidecars. No Flask import.

What they need to know of the collection (which item holds an IBI, the last edition, who names
an item) comes from the persistent index (`store`), so its cost does not grow with the
collection: the index says which few directories to look at, and those are read from disk,
which is always current. What the index may not hold yet (the indexer is busy, or none runs)
is covered by `<state_dir>/deposit.pending`, the directories deposits changed since the index
last held them; after its change a deposit brings the index up to date for them itself if no
refresh holds the index's write lock. Without a complete index the first deposit builds it.
"""

from __future__ import annotations

from .change import Removed, Revised, delete, revise
from .holdings import (
    DELETED_PREFIX,
    LOCK_FILE,
    PENDING_FILE,
    REPLACED_PREFIX,
    TEMP_PREFIX,
    DepositError,
    Holdings,
    Subsystem,
    batch,
    iso,
    locked,
    related_name,
    subsystem,
)
from .new import Deposited, deposit

__all__ = [
    "DELETED_PREFIX",
    "LOCK_FILE",
    "PENDING_FILE",
    "REPLACED_PREFIX",
    "TEMP_PREFIX",
    "DepositError",
    "Deposited",
    "Holdings",
    "Removed",
    "Revised",
    "Subsystem",
    "batch",
    "delete",
    "deposit",
    "iso",
    "locked",
    "related_name",
    "revise",
    "subsystem",
]
