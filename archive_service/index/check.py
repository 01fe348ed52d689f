"""`archive-service check` from the persistent index: what is wrong in a collection, read from
the index once it is brought up to date (only what changed is read again), instead of reading
every sidecar of the collection (`collection.items.scan`), which stays the way when there is
no complete index to refresh."""

from __future__ import annotations

import logging
import os
import sqlite3
from pathlib import Path

from ..collection import items
from ..collection.items import Problem
from .catalog import StoreCatalog
from .store import Store, Writer

log = logging.getLogger(__name__)


def check(collection: str | os.PathLike, state_dir: str | os.PathLike) -> tuple[list[Problem], int]:
    """The problems of `collection` and how many items it serves; from the index kept for it
    in `state_dir` when one of this user's is complete and can be refreshed, else by reading
    the whole collection."""
    root = Path(collection)
    if not root.is_dir():
        raise FileNotFoundError(f"collection {root} is not a directory")
    store = Store(root, state_dir)
    try:
        # Another user's index (the service's, with check run by root) is not written: its
        # files would no longer be the service's to write.
        complete = (
            store.exists() and os.stat(store.path).st_uid == os.geteuid() and store.is_complete()
        )
        if complete:
            Writer(store).refresh()
    except (sqlite3.Error, OSError) as exc:
        log.info("cannot refresh the index %s (%s): reading the collection", store.path, exc)
        complete = False
    if not complete:
        catalog = items.scan(root)
        return catalog.problems + items.check_references(catalog), len(catalog.by_directory)
    catalog = StoreCatalog(store)
    try:
        catalog.begin()  # one snapshot of the index for everything below
        # The index's walk keeps no problem of the levels above the items (a link to a
        # directory there, which is not followed): a walk of those levels finds them.
        problems: list[Problem] = []
        for _ in items.item_directories(root, problems):
            pass
        problems = sorted(problems + catalog.problems, key=items.position)  # as scan lists them
        relating = catalog.relating()
        problems += items.edition_cycles(relating, catalog.lookup)
        problems += items.wrong_references(relating, catalog.lookup)
        return problems, catalog.count()
    finally:
        catalog.end()
        catalog.close()
