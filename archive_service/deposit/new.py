"""A new item (`deposit`): minted, built in a temporary directory, renamed into place, its
relations written into the other items' sidecars (see deposit/__init__.py)."""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

from ..collection import items, sidecar_update
from ..collection import sidecar as sidecarmod
from ..collection.sidecar import SIDECAR
from ..common import files as filesmod
from ..common.net import persistent_url
from ..settings import DEFAULT_RESOLVER
from . import mint as mintmod
from .build import checked_sources, fill_doc, make_temp_dir, new_sidecar
from .holdings import (
    DepositError,
    Holdings,
    held,
    iso,
    last_held_edition,
    locked_holdings,
    related_name,
    subsystem,
)


@dataclass
class Deposited:
    directory: Path  # where the item now is
    minted: mintmod.Minted
    files: list[str]
    target: str | None
    linked: list[str] = field(default_factory=list)  # what changed in other items
    notes: list[str] = field(default_factory=list)

    @property
    def primary(self) -> str:
        return self.minted.rep or self.minted.ibip  # type: ignore[return-value]


def deposit(
    config: Mapping[str, Any],
    files: Sequence[str | os.PathLike[str]],
    *,
    target: str | None = None,
    language: str | None = None,
    title: str | None = None,
    nextedition_of: str | None = None,
    translation_of: str | None = None,
    granularity: Decimal | int | float | str = 1,
    now: Callable[[], Decimal | int | float] = time.time,
    sleep: Callable[[float], object] = time.sleep,
    before_rename: Callable[[Path], object] | None = None,
    location: str | None = None,
    extra: Mapping[str, Any] | None = None,
    on_minted: Callable[[str], object] | None = None,
    holdings: Holdings | None = None,
    no_links: bool = False,
) -> Deposited:
    """Mint an IBI and put `files` into the collection as a new item (see module docstring).

    `location`: the http(s) URL where the item's content lives (then `files` may be empty
    and the item has no doc/); `extra`: more sidecar keys (an import's dc, contenttype …);
    `on_minted(label)` is called with the new IBI before the item appears, so that a caller
    can record it first (an import's mapping: a crash then leaves no item it does not know);
    `holdings`: those of a `batch` the caller holds; `no_links`: refuse a file with a
    symbolic link anywhere on its path (files an import checked earlier).
    Raises DepositError (nothing changed) for bad input, a related IBI not held here, or an
    item already in the way. `before_rename(temp_dir)` is for tests of a cut-short deposit.
    """
    collection = Path(config["collection"])
    location, sources, language = _checked(
        collection, files, target, language, title, translation_of, location
    )
    names = [name for name, _ in sources]
    source = subsystem(config)
    form = source.form
    state_dir = config["state_dir"]

    with locked_holdings(config, holdings) as catalog:
        relations = _relations(catalog, collection, nextedition_of, translation_of, language)
        minted = mintmod.mint(
            source.host,
            source.port,
            source.ip,
            form,
            state_dir=state_dir,
            granularity=granularity,
            now=now,
            sleep=sleep,
            database=config.get("database") or "",
        )
        for label in filter(None, (minted.rep, minted.ibip)):
            if catalog.lookup(label) is not None:
                raise DepositError(
                    f"the minted IBI {label} is already held by "
                    f"{catalog.lookup(label).directory}: was {state_dir} reset? "
                    "Nothing changed; deposit again"
                )
        primary = minted.rep or minted.ibip
        final = collection / primary
        if os.path.lexists(final):
            raise DepositError(f"{final} already exists; nothing changed")
        created = datetime.fromtimestamp(int(minted.time), UTC)
        reverse = relations.reverse_language
        translations = (
            {reverse: related_name(catalog, translation_of)} if translation_of and reverse else None
        )
        data = _sidecar_data(
            config, minted, created, language, location, target, translations, title
        )
        data.update(extra or {})
        sidecar_text = new_sidecar(data, created)
        updates, linked = _relation_updates(collection, relations, primary, language)
        _build_in_place(
            collection,
            final,
            sources,
            sidecar_text,
            updates,
            no_links,
            before_rename,
            lambda: on_minted(primary) if on_minted is not None else None,
        )
        notes = relations.notes
        for update in updates:
            sidecar_update.commit(update)
            if not update.comments_kept:
                notes.append(
                    f"{update.path} was rewritten by PyYAML: its comments below the "
                    "top were not kept"
                )
        catalog.changed([primary, *relations.changes])
    return Deposited(final, minted, names, target, linked, notes)


def _checked(
    collection: Path,
    files: Sequence[str | os.PathLike[str]],
    target: str | None,
    language: str | None,
    title: str | None,
    translation_of: str | None,
    location: str | None,
) -> tuple[str | None, list[tuple[str, Path]], str | None]:
    """The deposit's location, files and language as given, checked before anything is
    locked or minted (DepositError: nothing changed)."""
    if not collection.is_dir():
        raise DepositError(f"collection {collection} is not a directory")
    if location is not None:
        try:
            location = sidecarmod.location_url(location)
        except ValueError as exc:
            raise DepositError(f"--location: {exc}") from None
    sources = checked_sources(files, location)
    names = [name for name, _ in sources]
    if target is not None:
        if target not in names:
            raise DepositError(
                f"--target {target!r} is not one of the files deposited ({', '.join(names)})"
            )
    if language is not None:
        try:
            language = sidecarmod.normalize_language(language)
        except ValueError as exc:
            raise DepositError(f"--language: {exc}") from None
    if title is not None and not title.strip():
        raise DepositError("--title is empty")
    if translation_of and not language:
        raise DepositError(
            "--translation-of needs --language: the other item lists its translations by language"
        )
    return location, sources, language


@dataclass
class _Relations:
    """What the new item changes in the items it is related to, found before minting."""

    changes: dict[str, dict[str, Any]] = field(default_factory=dict)  # directory -> keys
    related: dict[str, items.Item] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    reverse_language: str | None = None


def _relations(
    catalog: Holdings,
    collection: Path,
    nextedition_of: str | None,
    translation_of: str | None,
    language: str | None,
) -> _Relations:
    found = _Relations()
    if nextedition_of:
        old = held(catalog, nextedition_of, "--nextedition-of")
        if old.nextedition is not None:
            last = last_held_edition(catalog, old)
            hint = f"; the last edition held here is {last.name}" if last is not old else ""
            raise DepositError(
                f"--nextedition-of {nextedition_of}: {old.directory} already "
                f"has a next edition, {old.nextedition}{hint}"
            )
        found.related[old.directory] = old
        found.changes.setdefault(old.directory, {})["nextedition"] = None  # set after minting
    if translation_of:
        other = held(catalog, translation_of, "--translation-of")
        if other.language == language:
            raise DepositError(
                f"--translation-of {translation_of}: that item is in "
                f"{language} too; a translation is in another language"
            )
        if language in other.translations:
            raise DepositError(
                f"--translation-of {translation_of}: it already has a "
                f"{language} translation, {other.translations[language]}"
            )
        found.related[other.directory] = other
        found.changes.setdefault(other.directory, {})["translations"] = None
        found.reverse_language = other.language
        if found.reverse_language is None:
            found.notes.append(
                f"{other.directory} has no language, so the new item's sidecar "
                f"cannot list it under translations; add 'language:' to "
                f"{other.directory}/{SIDECAR} and the reverse entry will be derived"
            )
    for directory in found.related:
        sidecar_update.load(collection / directory / SIDECAR)  # refuse before minting
    return found


def _sidecar_data(
    config: Mapping[str, Any],
    minted: mintmod.Minted,
    created: datetime,
    language: str | None,
    location: str | None,
    target: str | None,
    translations: dict[str, str] | None,
    title: str | None,
) -> dict[str, Any]:
    primary = minted.rep or minted.ibip
    data: dict[str, Any] = {}
    if minted.rep and minted.ibip:
        data["ibip"] = minted.ibip
    if language:
        data["language"] = language
    data["timestamp"] = iso(created)
    if location:
        data["location"] = location
    if target:
        data["target"] = target
    if translations:
        data["translations"] = translations
    if title:
        dc: dict[str, Any] = {"title": title.strip()}
        if language:
            dc["language"] = language
        dc["date"] = created.strftime("%Y-%m-%d")
        identifier = persistent_url(config.get("resolver") or DEFAULT_RESOLVER, primary)
        if identifier:  # none without a resolver (`resolver: none`)
            dc["identifier"] = identifier
        data["dc"] = dc
    return data


def _relation_updates(
    collection: Path, relations: _Relations, primary: str, language: str | None
) -> tuple[list[sidecar_update.Update], list[str]]:
    """The other items' sidecars as the new item's relations change them, and what changed."""
    updates: list[sidecar_update.Update] = []
    linked: list[str] = []
    for directory, keys in relations.changes.items():
        item = relations.related[directory]
        new_values: dict[str, Any] = {}
        if "nextedition" in keys:
            new_values["nextedition"] = primary
            linked.append(f"{directory}: nextedition {primary}")
        if "translations" in keys:
            _, old_data = sidecar_update.load(collection / directory / SIDECAR)
            translations = dict(old_data.get("translations") or {})
            translations[language] = primary
            new_values["translations"] = translations
            linked.append(f"{directory}: translations {language}: {primary}")
            if relations.reverse_language:
                linked.append(f"{primary}: translations {relations.reverse_language}: {item.name}")
        updates.append(sidecar_update.prepare(collection / directory / SIDECAR, new_values))
    return updates, linked


def _build_in_place(
    collection: Path,
    final: Path,
    sources: Sequence[tuple[str, Path]],
    sidecar_text: str,
    updates: list[sidecar_update.Update],
    no_links: bool,
    before_rename: Callable[[Path], object] | None,
    minted: Callable[[], object],
) -> None:
    """The whole item built in a temporary directory, the other sidecars staged, then the
    item renamed into place in one step; nothing is left of it if any of that fails."""
    temp = make_temp_dir(collection)
    try:
        if sources:  # an item whose content lives at its location may have no doc/
            fill_doc(temp / items.DOC, sources, no_links)
        filesmod.write_new(temp / SIDECAR, sidecar_text)
        filesmod.fsync_dir(temp)
        for update in updates:
            sidecar_update.stage(update)
        if before_rename is not None:
            before_rename(temp)
        minted()
        final.parent.mkdir(parents=True, exist_ok=True)
        # os.rename would silently replace an empty directory: look again, under the lock.
        if os.path.lexists(final):
            raise DepositError(f"{final} already exists; nothing changed")
        os.rename(temp, final)
    except BaseException as exc:
        shutil.rmtree(temp, ignore_errors=True)
        for update in updates:
            sidecar_update.discard(update)
        if isinstance(exc, OSError):
            # The collection full, a file unreadable: nothing is left of the item, say so
            # in one line (the command printed a traceback).
            raise DepositError(f"cannot build the item: {exc}; nothing changed") from exc
        raise
    filesmod.fsync_dir(final.parent)
