"""Applying a source's records to the collection (issue 21): the one function every import
source (manifest, BagIt, OAI-PMH) ends in.

`apply(config, source, records)` keeps, per source, the mapping source id -> IBI
(stores/mapping/), so that a re-run mints nothing twice:

- a record not mapped yet is minted once, through `deposit` (its lock, its minting, the index
  brought up to date for it: the service answers for it within a second, never blocked);
- a mapped record whose fingerprint (its content, its files' bytes, its relations as IBIs)
  changed is revised in place (`deposit.revise`);
- a record marked `deleted`, and with `complete=True` a mapped record the source no longer
  yields, becomes a Deleted tombstone (`deposit.delete`);
- relations name the source's own ids, here or in an earlier run of the same source; they
  become IBIs: `edition_of X` sets X's `nextedition`, `metadata_of X` sets X's `metadata` (and
  makes this item's contenttype Metadata), `translation_of X` puts X under this item's
  `translations` (the index derives the other side).

Every record is checked before anything changes: one problem line per fault, each naming
where (`Record.where`), and `ImportRefused` with all of them; nothing is half-applied. A dry
run checks the same way and lists what it would do.

No web framework here.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import logging
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import ExitStack, contextmanager
from decimal import Decimal
from pathlib import Path
from typing import Any

from .. import deposit as depositmod
from ..collection import sidecar as sidecarmod
from ..collection import sidecar_update
from ..common import files as filesmod
from ..stores.mapping import ImportMapping, Mapped, open_mapping
from . import checks
from .checks import OWN_KEYS, own_keys
from .records import EDITION_OF, METADATA_OF, Record
from .summary import Summary

log = logging.getLogger(__name__)

LOCK_FILE = "import.lock"
# Imports mint many IBIs in a row: a hundredth of a second apart (100 a second) rather than
# deposit's one second (repository names then end in `.ss.ff`, as ID§6 allows).
GRANULARITY = Decimal("0.01")
CHUNK = 1 << 20
# Deposits and revisions share one deposit lock and one look at the index for this many
# items or seconds, whichever comes first (half the cost of an item was opening and closing
# those); then the lock is let go, so a deposit by hand waits at most that long.
BATCH_ITEMS, BATCH_SECONDS = 50, 0.5


class _Batches:
    """`deposit.batch` taken and let go in turns (see BATCH_ITEMS)."""

    def __init__(self, config: Mapping[str, Any]):
        self.config = config
        self.stack: ExitStack | None = None
        self.holdings = None
        self.count = 0
        self.opened = 0.0

    def __call__(self):
        """The holdings for the next deposit or revision."""
        if self.stack is not None and (
            self.count >= BATCH_ITEMS or time.monotonic() - self.opened > BATCH_SECONDS
        ):
            self.close()
        if self.stack is None:
            self.stack = ExitStack()
            self.holdings = self.stack.enter_context(depositmod.batch(self.config))
            self.count, self.opened = 0, time.monotonic()
        self.count += 1
        return self.holdings

    def close(self) -> None:
        if self.stack is not None:
            self.stack.close()
            self.stack = self.holdings = None


class ImportRefused(Exception):
    """The records cannot be applied; `problems` has one line per fault and nothing changed."""

    def __init__(self, problems: list[str]):
        self.problems = problems
        self.applied = 0  # records of a streamed import applied before (kept)
        super().__init__("\n".join(problems))


@contextmanager
def _import_lock(config: Mapping[str, Any], source: str) -> Iterator[None]:
    """One import at a time per state directory, and with `database` one import of `source`
    at a time on every node: two runs of one source would both mint an unmapped record. Not
    the deposit lock: deposits (and the service) go on meanwhile."""
    state_dir = Path(config["state_dir"])
    state_dir.mkdir(parents=True, exist_ok=True)
    with open(state_dir / LOCK_FILE, "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not config.get("database"):
            yield
            return
        from ..common import postgres

        # A session lock on a connection of its own: the server drops it with the
        # connection, so an import killed midway holds no other node up.
        key = postgres.advisory_key(f"import {source}")
        conn = postgres.session(config["database"], f"archive-service import {source}")
        try:
            if not conn.execute("SELECT pg_try_advisory_lock(%s)", (key,)).fetchone()[0]:
                log.warning("waiting for another node's import of %s to end", source)
                conn.execute("SELECT pg_advisory_lock(%s)", (key,))
            yield
        finally:
            conn.close()


def _file_digest(path: Path) -> str:
    digest = hashlib.sha256()
    # Checked when the source was read, read now: no link swapped in since is followed.
    with open(filesmod.open_no_links(path), "rb") as stream:
        while chunk := stream.read(CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def _fingerprint(
    own: Mapping[str, Any], files: Iterable[Path], data: str | None = None
) -> tuple[str, str]:
    """(of the sidecar keys, of the files' names and bytes): each part changes alone.
    `data`: the second part, when the files were read already."""
    keys = hashlib.sha256(json.dumps(own, sort_keys=True).encode()).hexdigest()[:32]
    if data is None:
        listed = [(path.name, _file_digest(path)) for path in files]
        data = hashlib.sha256(json.dumps(listed).encode()).hexdigest()[:32]
    return keys, data


def _directory(config: Mapping[str, Any], ibi: str) -> Path:
    return Path(config["collection"]) / ibi


def apply(
    config: Mapping[str, Any],
    source: str,
    records: Iterable[Record],
    *,
    dry_run: bool = False,
    complete: bool = True,
    progress: Callable[[int, int], object] | None = None,
    granularity: Decimal | int | float | str = GRANULARITY,
    problems: Iterable[str] = (),
    batch: int | None = None,
    keep_actions: bool = True,
) -> Summary:
    """Apply `records` of `source` (a stable name: "manifest:/path/x.csv", "oai-pmh:URL")
    to the collection of `config` (see the module docstring).

    `complete`: the records are everything the source holds, so a mapped record missing
    from them is turned into a tombstone (False for incremental harvests, which report
    deletions as records with `deleted`). `progress(done, total)` is called as records are
    applied. `problems`: faults the source met reading its records (a manifest's bad cells),
    refused together with those found here, in the order of their places.

    `batch`: the records are streamed (an OAI-PMH harvest, `complete=False`): read, checked
    and applied `batch` at a time, so that memory does not grow with their number; a record
    listed twice in one batch is applied as listed last; `summary.ibis` is not kept, nor
    `summary.actions` unless `keep_actions`; `progress` gets None for the total.

    Raises ImportRefused (nothing changed; streamed, nothing of its batch, `applied` records
    before it kept) when a record cannot be applied, and DepositError or OSError when the
    collection refuses a change midway: what was done by then is mapped, and a re-run goes
    on from there."""
    if batch is not None and complete:
        raise ValueError("a streamed import is never complete")
    how = {"complete": complete, "progress": progress, "granularity": granularity}
    summary = Summary(dry_run=dry_run)
    whole = batch is None
    with _import_lock(config, source):
        mapping = open_mapping(config)
        try:
            if whole:
                records = list(records)
                mapped = mapping.load(source)
                _apply_batch(config, source, records, mapped, mapping, summary, problems, **how)
                return summary
            done = 0
            for chunk in _chunks(records, batch):
                ids = {r.source_id for r in chunk} | {
                    other for r in chunk for other in r.relations.values()
                }
                try:
                    _apply_batch(
                        config,
                        source,
                        chunk,
                        mapping.load(source, ids),
                        mapping,
                        summary,
                        problems,
                        base=done,
                        **how,
                    )
                except ImportRefused as exc:
                    exc.applied = done
                    raise
                problems = ()  # the source's own, once
                done += len(chunk)
                summary.ibis.clear()  # memory flat in the number of records
                if not keep_actions:
                    summary.actions.clear()
        finally:
            mapping.close()
    return summary


def _chunks(records: Iterable[Record], size: int) -> Iterator[list[Record]]:
    """`records` `size` at a time, each source id once a chunk: a record listed again later
    (changed while a harvest paged through the list) is the record now."""
    chunk: dict[str, Record] = {}
    for record in records:
        chunk.pop(record.source_id, None)
        chunk[record.source_id] = record
        if len(chunk) >= size:
            yield list(chunk.values())
            chunk = {}
    if chunk:
        yield list(chunk.values())


def _apply_batch(
    config: Mapping[str, Any],
    source: str,
    records: list[Record],
    mapped: dict[str, Mapped],
    mapping: ImportMapping,
    summary: Summary,
    problems: Iterable[str],
    *,
    complete: bool,
    progress: Callable[[int, int | None], object] | None,
    granularity: Decimal | int | float | str,
    base: int | None = None,
) -> None:
    """`records` checked, then applied (`apply`); `base`: the records applied before, in
    a streamed import (whose total is not known)."""
    # A row whose item never appeared (a crash between recording and making it).
    for source_id, row in list(mapped.items()):
        if not row.deleted and not _directory(config, row.ibi).is_dir():
            del mapped[source_id]
    languages: dict[str, str] = {}
    problems = [*problems, *checks.problems(records, mapped, languages, complete)]
    if any(not r.deleted and r.source_id not in mapped for r in records):
        try:  # before anything is minted, and in a dry run too
            depositmod.subsystem(config).form  # noqa: B018 (raises when none)
        except depositmod.DepositError as exc:
            problems.append(f"{config['collection']}: {exc}")
    if problems:
        raise ImportRefused(sorted(problems, key=checks.place))
    if progress is not None and base is not None:
        shown, progress = progress, lambda done, total: shown(base + done, None)
    batches = _Batches(config)
    try:
        _run(
            config,
            source,
            records,
            mapped=mapped,
            languages=languages,
            mapping=mapping,
            summary=summary,
            complete=complete,
            progress=progress,
            granularity=granularity,
            batches=batches,
        )
    finally:
        batches.close()


def _run(
    config: Mapping[str, Any],
    source: str,
    records: list[Record],
    *,
    mapped: dict[str, Mapped],
    languages: Mapping[str, str],
    mapping: ImportMapping,
    summary: Summary,
    complete: bool,
    progress: Callable[[int, int], object] | None,
    granularity: Decimal | int | float | str,
    batches: _Batches,
) -> None:
    """The changes of an import `apply` has found acceptable, in four passes (by keyword
    past the first three: two booleans and two maps in a row are easily swapped)."""
    dry = summary.dry_run
    live = [r for r in records if not r.deleted]
    gone = {r.source_id for r in records if r.deleted}
    if complete:
        present = {r.source_id for r in records}
        gone |= {sid for sid in mapped if sid not in present}
    gone = {sid for sid in gone if sid in mapped and not mapped[sid].deleted}
    total = len(live) + len(gone)
    done = 0

    def step() -> None:
        nonlocal done
        done += 1
        if progress is not None:
            progress(done, total)

    ibis = {sid: row.ibi for sid, row in mapped.items() if not row.deleted}
    new = [r for r in live if r.source_id not in ibis]
    made: dict[str, str] = {}  # source id -> the data part of its fingerprint, when minted
    # 1. Mint what is new, with its own keys but those naming other records (not all minted).
    _mint_new(config, source, new, ibis, made, mapping, summary, granularity, batches)
    # 2. Bring each live record's own item to what the record says now.
    fresh = {r.source_id for r in new}
    for record in live:
        own = own_keys(record, ibis, languages)
        keys, data = _fingerprint(own, record.files, made.get(record.source_id))
        fingerprint = f"{keys}:{data}"
        ibi = ibis[record.source_id]
        before = mapped.get(record.source_id)
        old_keys, _, old_data = (before.fingerprint if before else "").partition(":")
        was = None  # its translations before (a relation set, when they change)
        if record.source_id in fresh:
            needs = "translations" in own  # the one key minting left out
        else:
            needs = fingerprint != before.fingerprint
            if not needs:
                summary.unchanged += 1
            elif keys != old_keys:
                was = _sidecar(config, ibi).get("translations")
        if needs and not dry:
            files = None
            if record.source_id not in fresh and data != old_data:
                files = list(record.files)
            revised = _revise(
                config,
                batches,
                summary,
                record.where,
                ibi,
                changes=own,
                removed=[k for k in OWN_KEYS if k not in own],
                files=files,
            )
            if not revised:
                step()
                continue
            if not revised.changed:  # the item was as the record says (a run cut short)
                needs = False
                if record.source_id not in fresh:
                    summary.unchanged += 1
        if needs and record.source_id not in fresh:
            summary.updated += 1
            what = (
                "files and keys"
                if data != old_data and keys != old_keys
                else ("files" if data != old_data else "keys")
            )
            summary.actions.append(
                f"{'update' if dry else 'updated'} {ibi} for {record.source_id} ({what})"
            )
        if needs and (record.source_id in fresh or keys != old_keys):
            if own.get("translations") != was:
                summary.linked_translation(ibi, own.get("translations"))
        if not dry:
            mapping.put(source, record.source_id, Mapped(ibi, fingerprint, False))
        step()
    # 3. Relations set on the other item (its next edition, its metadata); with the whole
    # source at hand, those this source set that no record says any longer are taken out.
    _set_relations(config, live, ibis, complete, summary, batches)
    # 4. Tombstones (delete takes the deposit lock itself).
    batches.close()
    _tombstones(config, source, gone, mapped, mapping, summary, step)
    summary.ibis = {r.source_id: ibis[r.source_id] for r in live}


def _mint_new(
    config: Mapping[str, Any],
    source: str,
    new: list[Record],
    ibis: dict[str, str],
    made: dict[str, str],
    mapping: ImportMapping,
    summary: Summary,
    granularity: Decimal | int | float | str,
    batches: _Batches,
) -> None:
    """_run's first pass: an item minted for each new record, mapped as soon as it is minted
    (`ibis` and `made` filled in)."""
    dry = summary.dry_run
    for record in new:
        own = own_keys(record, {}, {})
        location = own.pop("location", None)
        language = own.pop("language", None)
        if dry:
            ibis[record.source_id] = f"(new: {record.source_id})"
            summary.actions.append(f"mint {record.source_id} ({record.where})")
        else:
            # The files' part of the fingerprint is mapped with the IBI: a run cut short
            # after this deposit (kill, full disk) and run again finds the files as copied,
            # instead of copying them once more and keeping the first copy aside.
            data = made[record.source_id] = _fingerprint({}, record.files)[1]
            deposited = depositmod.deposit(
                config,
                list(record.files),
                language=language,
                location=location,
                extra=own,
                granularity=granularity,
                holdings=batches(),
                no_links=True,
                on_minted=lambda label, sid=record.source_id, data=data: mapping.put(
                    source, sid, Mapped(label, f":{data}", False)
                ),
            )
            ibis[record.source_id] = deposited.primary
            summary.actions.append(f"minted {deposited.primary} for {record.source_id}")
        summary.minted += 1


def _set_relations(
    config: Mapping[str, Any],
    live: list[Record],
    ibis: dict[str, str],
    complete: bool,
    summary: Summary,
    batches: _Batches,
) -> None:
    """_run's third pass: the relations the records set on other items (next edition,
    metadata); with `complete`, those no record says any longer are taken out."""
    dry = summary.dry_run
    wanted: dict[tuple[str, str], tuple[str, str]] = {}  # (item, key) -> (value, where)
    for record in live:
        for key, sidecar_key in ((EDITION_OF, "nextedition"), (METADATA_OF, "metadata")):
            other = record.relations.get(key)
            if other is not None:
                wanted[(ibis[other], sidecar_key)] = (ibis[record.source_id], record.where)
    for (target, sidecar_key), (value, where) in wanted.items():
        current = None if target.startswith("(new") else _sidecar_value(config, target, sidecar_key)
        if current == value:
            continue
        if current is not None:
            summary.notes.append(f"{where}: {target} had {sidecar_key} {current}; now {value}")
        if not dry and not _revise(
            config, batches, summary, where, target, changes={sidecar_key: value}
        ):
            continue
        summary.linked += 1
        summary.actions.append(f"{'would set' if dry else 'set'} {sidecar_key} {value} on {target}")
    if complete:
        ours = set(ibis.values())
        for record in live:
            target = ibis[record.source_id]
            if target.startswith("(new"):
                continue
            for sidecar_key in ("nextedition", "metadata"):
                current = _sidecar_value(config, target, sidecar_key)
                if current in ours and (target, sidecar_key) not in wanted:
                    if not dry and not _revise(
                        config, batches, summary, record.where, target, removed=[sidecar_key]
                    ):
                        continue
                    summary.linked += 1
                    summary.actions.append(
                        f"{'would take' if dry else 'took'} {sidecar_key} {current} out of "
                        f"{target} (no row says so any longer)"
                    )


def _tombstones(
    config: Mapping[str, Any],
    source: str,
    gone: set[str],
    mapped: dict[str, Mapped],
    mapping: ImportMapping,
    summary: Summary,
    step: Callable[[], None],
) -> None:
    """_run's last pass: the items of records gone from the source, tombstones."""
    dry = summary.dry_run
    for source_id in sorted(gone):
        ibi = mapped[source_id].ibi
        if not dry:
            try:
                depositmod.delete(config, ibi)
            except depositmod.DepositError as exc:
                if "already Deleted" not in str(exc):
                    raise
            mapping.put(source, source_id, Mapped(ibi, mapped[source_id].fingerprint, True))
        summary.deleted += 1
        summary.actions.append(f"{'delete' if dry else 'deleted'} {ibi} ({source_id})")
        step()


def _revise(
    config, batches: _Batches, summary: Summary, where: str, ibi: str, **change
) -> depositmod.Revised | None:
    """`deposit.revise`, but an item an admin has turned into a tombstone since is left as
    it is, with a note (a tombstone is never brought back)."""
    try:
        revised = depositmod.revise(config, ibi, holdings=batches(), no_links=True, **change)
    except depositmod.DepositError:
        if _sidecar_value(config, ibi, "state") != "Deleted":
            raise
        summary.notes.append(f"{where}: {ibi} is Deleted (by hand?): left as it is")
        return None
    return revised


def _sidecar(config: Mapping[str, Any], ibi: str) -> dict[str, Any]:
    return sidecar_update.load(_directory(config, ibi) / sidecarmod.SIDECAR)[1]


def _sidecar_value(config: Mapping[str, Any], ibi: str, key: str) -> str | None:
    value = _sidecar(config, ibi).get(key)
    return None if value is None else str(value)
