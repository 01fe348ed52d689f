"""An item changed in place (`revise`) and an item turned into a Deleted tombstone (`delete`)."""

from __future__ import annotations

import os
import secrets
import shutil
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ..collection import items, sidecar_update
from ..collection.sidecar import SIDECAR
from ..common import files as filesmod
from ..protocol import ibi as ibimod
from .build import checked_sources, fill_doc
from .holdings import (
    DELETED_PREFIX,
    REPLACED_PREFIX,
    TEMP_PREFIX,
    DepositError,
    Holdings,
    iso,
    locked,
    locked_holdings,
    open_holdings,
)


@dataclass
class Revised:
    directory: Path
    changed: bool  # False: the item already was as asked
    replaced_to: Path | None  # where the previous doc/ was put aside
    comments_kept: bool


def revise(
    config: Mapping[str, Any],
    label: str,
    *,
    changes: Mapping[str, Any] | None = None,
    removed: Iterable[str] = (),
    files: Sequence[str | os.PathLike[str]] | None = None,
    now: Callable[[], float] = time.time,
    holdings: Holdings | None = None,
    no_links: bool = False,
) -> Revised:
    """Change the item `label` in place, under the deposit lock: set the sidecar keys
    `changes`, take out the keys `removed`, and with `files` (a list, perhaps empty) give it
    a new doc/ holding them; the previous doc/ is moved to `.replaced-doc-<time>/` inside
    the item (nothing is removed, nothing under it is served). The timestamp becomes the
    time of the change. Nothing is written when the item already is as asked. `holdings`:
    those of a `batch` the caller holds; `no_links` as for `deposit`."""
    collection = Path(config["collection"])
    sources = checked_sources(files, "") if files else []
    with locked_holdings(config, holdings) as catalog:
        item = catalog.lookup(label)
        if item is None:
            raise DepositError(f"{label}: no item of this collection ({collection}) has this IBI")
        if item.state == "Deleted":
            raise DepositError(f"{label}: {item.directory} is Deleted")
        directory = collection / item.directory
        path = directory / SIDECAR
        _, data = sidecar_update.load(path)
        changes = {k: v for k, v in (changes or {}).items() if data.get(k) != v}
        removed = [k for k in removed if k in data and k not in changes]
        if not changes and not removed and files is None:
            return Revised(directory, False, None, True)
        when = datetime.fromtimestamp(int(now()), UTC)
        changes["timestamp"] = iso(when)
        update = sidecar_update.prepare(path, changes, removed=removed)
        new_doc = moved_to = None
        try:
            if sources:
                new_doc = directory / f"{TEMP_PREFIX}doc-{secrets.token_hex(6)}"
                fill_doc(new_doc, sources, no_links)
            sidecar_update.stage(update)
            doc = directory / items.DOC
            if files is not None and os.path.lexists(doc):
                moved_to = directory / f"{REPLACED_PREFIX}{when:%Y%m%dT%H%M%SZ}"
                while os.path.lexists(moved_to):
                    moved_to = moved_to.with_name(f"{moved_to.name}-{secrets.token_hex(2)}")
                os.rename(doc, moved_to)
            if new_doc is not None:
                os.rename(new_doc, doc)
                new_doc = None
            sidecar_update.commit(update)
        except BaseException:
            if new_doc is not None:
                shutil.rmtree(new_doc, ignore_errors=True)
            sidecar_update.discard(update)
            raise
        filesmod.fsync_dir(directory)
        catalog.changed([item.directory])
    return Revised(directory, True, moved_to, update.comments_kept)


# ----------------------------------------------------------------------------- delete


@dataclass
class Removed:
    directory: Path
    item: items.Item
    when: datetime
    moved_to: Path | None
    files: int
    comments_kept: bool
    referenced_by: list[str] = field(default_factory=list)


def delete(config: Mapping[str, Any], label: str, now: Callable[[], float] = time.time) -> Removed:
    """Turn the item `label` into a Deleted tombstone (see module docstring)."""
    try:
        ibimod.parse(label)
    except ibimod.IbiError as exc:
        raise DepositError(str(exc)) from None
    collection = Path(config["collection"])
    if not collection.is_dir():
        raise DepositError(f"collection {collection} is not a directory")
    with (
        locked(config["state_dir"], config.get("database") or ""),
        open_holdings(config) as catalog,
    ):
        item = catalog.lookup(label)
        if item is None:
            raise DepositError(f"{label}: no item of this collection ({collection}) has this IBI")
        if item.state == "Deleted":
            raise DepositError(
                f"{label}: {item.directory} is already Deleted (since {iso(item.timestamp)})"
            )
        when = datetime.fromtimestamp(int(now()), UTC)
        directory = collection / item.directory
        doc = directory / items.DOC
        moved_to = directory / f"{DELETED_PREFIX}{when:%Y%m%dT%H%M%SZ}" if doc.is_dir() else None
        if moved_to is not None and os.path.lexists(moved_to):
            raise DepositError(f"{moved_to} already exists; nothing changed")
        files = len(items.list_files(collection, item))
        kept = f"doc/ moved to {moved_to.name}/" if moved_to else "there was no doc/"
        note = (
            f"Deleted with archive-service delete at {iso(when)}; {kept}. "
            f"Timestamp before: {iso(item.timestamp)}; state before: {item.state}."
        )
        update = sidecar_update.prepare(
            directory / SIDECAR, {"state": "Deleted", "timestamp": iso(when)}, note
        )
        try:
            # The sidecar first: from this instant the item is Deleted and nothing of it is
            # served, so a crash before the move below leaves a consistent tombstone.
            sidecar_update.commit(update)
        finally:
            sidecar_update.discard(update)
        if moved_to is not None:
            os.rename(doc, moved_to)
            filesmod.fsync_dir(directory)
        referenced_by = []
        for other in catalog.referrers(item):
            refs = [("nextedition", other.nextedition), ("metadata", other.metadata)]
            refs += [(f"translations {lang}", ref) for lang, ref in other.translations.items()]
            for what, ref in refs:
                if ref is not None and other.directory != item.directory:
                    held = catalog.lookup(ref)
                    if held is not None and held.directory == item.directory:
                        referenced_by.append(f"{other.directory} ({what})")
        catalog.changed([item.directory])
    return Removed(
        directory, item, when, moved_to, files, update.comments_kept, sorted(set(referenced_by))
    )
