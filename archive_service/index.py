"""The collection index: which directories are items, what their sidecars say, and lookups.

A directory is an item when its path relative to the collection is a repository name (four
segments) or an IBIp (two segments, holding `doc/` or `item.yaml`) — SPEC §7. The collection
is the source of truth; an index is always rebuilt from it.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from . import ibi as ibimod
from . import sidecar as sidecarmod
from .ibi import Forms, Ibi

log = logging.getLogger(__name__)

DOC = "doc"


@dataclass
class Problem:
    """Something wrong in the collection; `severity` is 'error' or 'warning'."""

    where: str
    message: str
    severity: str = "error"

    def __str__(self) -> str:
        return f"{self.severity}: {self.where}: {self.message}"


@dataclass
class Item:
    directory: str  # path relative to the collection, '/'-separated, as on disk
    name: Ibi  # the IBI the directory is named by
    forms: Forms  # every form this Archive knows the IBI by
    state: str
    contenttype: str
    language: str | None
    timestamp: datetime
    target: str | None  # file under doc/ opened by the bare persistent URL; None: the file list
    nextedition: Ibi | None = None
    translations: dict[str, Ibi] = field(default_factory=dict)
    metadata: Ibi | None = None
    formats: dict[str, str] = field(default_factory=dict)
    dc: dict[str, list[str]] | None = None
    filelist_public: bool = True
    networks: tuple = ()

    @property
    def primary(self) -> Forms:
        """The form the Archive files the item under: its directory name."""
        return Forms.of(self.name)

    def keys(self) -> list[str]:
        return self.forms.keys()


def _files_under(directory: Path) -> list[tuple[str, os.stat_result]]:
    """Regular files below `directory` (not following links out), as (relative path, stat)."""
    found = []
    stack = [(directory, "")]
    while stack:
        path, prefix = stack.pop()
        try:
            entries = list(os.scandir(path))
        except OSError:
            continue
        for entry in entries:
            rel = prefix + entry.name
            try:
                if entry.is_dir(follow_symlinks=False):
                    stack.append((Path(entry.path), rel + "/"))
                elif entry.is_file(follow_symlinks=False):
                    found.append((rel, entry.stat(follow_symlinks=False)))
            except OSError:
                continue
    return sorted(found)


def list_files(collection: Path, item: Item) -> list[tuple[str, int]]:
    """The item's files under doc/ with their sizes (for the file-list page)."""
    return [(rel, st.st_size) for rel, st in _files_under(collection / item.directory / DOC)]


def _utc(seconds: float) -> datetime:
    return datetime.fromtimestamp(int(seconds), tz=timezone.utc)


def iter_item_dirs(root: Path):
    """Yield (relative directory, Ibi) for every item directory under `root`."""

    def subdirs(path: Path):
        try:
            with os.scandir(path) as entries:
                return sorted(e.name for e in entries
                              if not e.name.startswith(".") and e.is_dir(follow_symlinks=False))
        except OSError as exc:
            log.warning("cannot read %s: %s", path, exc.strerror)
            return []

    for a in subdirs(root):
        for b in subdirs(root / a):
            two = f"{a}/{b}"
            if ibimod.is_valid(two) and ((root / two / DOC).is_dir()
                                         or (root / two / sidecarmod.SIDECAR).is_file()):
                yield two, ibimod.parse(two)
                continue
            for c in subdirs(root / two):
                for d in subdirs(root / two / c):
                    four = f"{two}/{c}/{d}"
                    if ibimod.is_valid(four):
                        yield four, ibimod.parse(four)


def load_item(root: Path, directory: str, name: Ibi,
              files: list[tuple[str, os.stat_result]] | None = None,
              has_sidecar: bool | None = None) -> tuple[Item, list[Problem]]:
    """Build one item from its directory; raise SidecarError if its sidecar is unusable.

    `files` is the item's `_files_under(doc/)` listing, and `has_sidecar` whether its
    item.yaml is a file, when the caller has just found out."""
    # os.path, not pathlib: this runs once per item of a first build (a third faster).
    path = os.path.join(root, directory)
    problems: list[Problem] = []
    sidecar_path = os.path.join(path, sidecarmod.SIDECAR)
    if has_sidecar is None:
        has_sidecar = os.path.isfile(sidecar_path)
    if has_sidecar:
        side = sidecarmod.read(sidecar_path)
        for key in side.unknown_keys:
            problems.append(Problem(f"{directory}/{sidecarmod.SIDECAR}",
                                    f"unknown key {key!r} (ignored)", "warning"))
        for message in side.warnings:
            problems.append(Problem(f"{directory}/{sidecarmod.SIDECAR}", message, "warning"))
    else:
        side = sidecarmod.Sidecar()
    rep, ibip = (name.text, side.ibip) if name.kind == "rep" else (side.rep, name.text)
    if name.kind == "rep" and side.rep and ibimod.key(side.rep) != name.key:
        problems.append(Problem(directory, f"rep {side.rep} differs from the directory name"))
    if name.kind == "ibip" and side.ibip and ibimod.key(side.ibip) != name.key:
        problems.append(Problem(directory, f"ibip {side.ibip} differs from the directory name"))

    if files is None:
        files = _files_under(os.path.join(path, DOC))
    timestamp = side.timestamp
    if timestamp is None:
        times = [st.st_mtime for _, st in files]
        if not times and has_sidecar:
            times = [os.stat(sidecar_path).st_mtime]
        timestamp = _utc(max(times) if times else os.stat(path).st_mtime)

    target = side.target
    names = [rel for rel, _ in files]
    if target is not None and target not in names and side.state != "Deleted":
        problems.append(Problem(directory, f"target {target!r} is not a file under doc/"))
    if target is None:
        if "index.html" in names:
            target = "index.html"
        elif len(names) == 1:
            target = names[0]
    for fmt, rel in side.formats.items():
        if rel not in names and side.state != "Deleted":  # a tombstone keeps its old keys
            problems.append(Problem(directory, f"formats: {fmt} file {rel!r} is not under doc/"))
    item = Item(
        directory=directory,
        name=name,
        forms=Forms(rep=rep, ibip=ibip),
        state=side.state,
        contenttype=side.contenttype,
        language=side.language,
        timestamp=timestamp,
        target=target,
        nextedition=side.nextedition,
        translations=dict(side.translations),
        metadata=side.metadata,
        formats=dict(side.formats),
        dc=side.dc,
        filelist_public=side.filelist_public,
        networks=side.networks,
    )
    return item, problems


class Catalog:
    """Every item of one collection, found by either form of its IBI in any case."""

    def __init__(self, root: Path):
        self.root = Path(root)
        self.items: dict[str, Item] = {}
        self.by_directory: dict[str, Item] = {}
        self.problems: list[Problem] = []
        self.languages: set[str] = set()
        self.has_unlanguaged = False

    def lookup(self, text: str | Ibi) -> Item | None:
        return self.items.get(ibimod.key(str(text)))

    def item_at(self, directory: str) -> Item | None:
        return self.by_directory.get(directory)

    def answer_cache(self) -> None:
        """Answers are not kept: this catalog changes in place, with nothing to say when."""
        return None

    def add(self, item: Item) -> None:
        """Add an item; of two directories claiming one IBI, the one named by the repository
        name is served (it is where the standard files an item), else the first found."""
        for k in item.keys():
            other = self.items.get(k)
            if other is None or other is item:
                continue
            if item.name.kind == "rep" and other.name.kind == "ibip":
                item, other = other, item
                self.remove(item)
                self.add(other)
            self.problems.append(Problem(
                item.directory, f"IBI {k} is also claimed by {other.directory}; "
                f"{other.directory} is served"))
            return
        for k in item.keys():
            self.items[k] = item
        self.by_directory[item.directory] = item

    def remove(self, item: Item) -> None:
        for k in item.keys():
            if self.items.get(k) is item:
                del self.items[k]
        self.by_directory.pop(item.directory, None)

    def finish(self) -> None:
        """Derive what spans items: reverse translations, the language set, edition cycles."""
        for item in self.by_directory.values():
            if item.language:
                self.languages.add(item.language)
            else:
                self.has_unlanguaged = True
            self.languages.update(item.translations)
        # A translation declared on one side is a translation on both sides.
        for item in list(self.by_directory.values()):
            for lang, ref in list(item.translations.items()):
                other = self.lookup(ref)
                if other is not None and item.language:
                    other.translations.setdefault(item.language, item.name)
        for item in self.by_directory.values():
            seen = {item.name.key}
            current = item
            while current.nextedition is not None:
                nxt = self.lookup(current.nextedition)
                if nxt is None:
                    break
                if nxt.name.key in seen:
                    self.problems.append(Problem(item.directory, "nextedition chain has a cycle "
                                                 f"through {nxt.directory}"))
                    break
                seen.add(nxt.name.key)
                current = nxt


def scan(root: Path) -> Catalog:
    """Walk the collection and build its catalog; a broken sidecar skips only its item."""
    root = Path(root)
    catalog = Catalog(root)
    if not root.is_dir():
        raise FileNotFoundError(f"collection {root} is not a directory")
    for directory, name in iter_item_dirs(root):
        try:
            item, problems = load_item(root, directory, name)
        except sidecarmod.SidecarError as exc:
            for problem in exc.problems:
                catalog.problems.append(Problem(f"{directory}/{sidecarmod.SIDECAR}", problem))
            continue
        except OSError as exc:
            catalog.problems.append(Problem(directory, f"cannot read: {exc.strerror}"))
            continue
        catalog.problems.extend(problems)
        catalog.add(item)
    catalog.finish()
    return catalog


def check_references(catalog: Catalog) -> list[Problem]:
    """Relations that point at items held here but of the wrong kind (for `check`)."""
    problems = []
    for item in catalog.by_directory.values():
        if item.metadata is not None:
            meta = catalog.lookup(item.metadata)
            if meta is not None and meta.contenttype != "Metadata":
                problems.append(Problem(item.directory, f"metadata {item.metadata} is held here "
                                        "but its contenttype is not Metadata"))
        if item.nextedition is not None and item.nextedition.key in item.keys():
            problems.append(Problem(item.directory, "nextedition names the item itself"))
    return problems
