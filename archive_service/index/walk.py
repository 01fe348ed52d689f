"""The index's walk of the collection: item directories in key order with their
fingerprints, the scopes a change can affect, and the key order itself.

What an item directory is lives in collection/items.py (subdirectories,
is_two_segment_item); this walk adds what the index needs: a fingerprint of what each item
is built from, scopes for partial refreshes and parallel first builds, and a count of the
directories visited (the inotify watches watching would need)."""

from __future__ import annotations

import hashlib
import os
import stat
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from ..collection import items
from ..collection import sidecar as sidecarmod
from ..protocol import ibi as ibimod
from ..protocol.catalog import DOC, SEP, directory_of, sortkey
from ..protocol.ibi import Ibi

__all__ = ["SEP", "directory_of", "sortkey"]  # the key order, from protocol/catalog.py


@dataclass(slots=True)
class Found:
    """An item directory as a walk finds it, with what its fingerprint is made of.

    A four-segment name is checked against the IBI rules only when the index does not hold
    it already (a stored name passed them): `name` is None until then."""

    directory: str
    name: Ibi | None
    fingerprint: str
    files: list[tuple[str, os.stat_result]]
    has_sidecar: bool
    sortkey: str = ""

    def __post_init__(self) -> None:
        self.sortkey = sortkey(self.directory)

    def valid(self) -> bool:
        if self.name is None:
            try:
                self.name = ibimod.parse(self.directory)
            except ibimod.IbiError:
                return False
        return True


def _is_real_dir(path: str) -> bool:
    try:
        return stat.S_ISDIR(os.lstat(path).st_mode)
    except OSError:
        return False


class Walk:
    """The item directories of a collection (the rules of `items.subdirectories` and
    `items.is_two_segment_item`, as `items.iter_item_dirs`), in key order.

    `dirs` counts the directories visited: a lower bound of the inotify watches that
    watching the collection needs."""

    def __init__(self, root: str | os.PathLike):
        self.root = os.fspath(root)
        self.dirs = 0

    def _subdirs(self, path: str) -> list[str]:
        self.dirs += 1
        return items.subdirectories(path)

    def _is_two_item(self, two: str) -> bool:
        return items.is_two_segment_item(self.root, two)

    def files_under(self, directory: str) -> list[tuple[str, os.stat_result]]:
        """`items.files_under`, counting directories."""
        counter = [0]
        found = items.files_under(directory, counter)
        self.dirs += counter[0]
        return found

    def found(self, directory: str, name: Ibi | None = None) -> Found:
        path = f"{self.root}/{directory}"
        parts = []
        mark = items.sidecar_mark(path)
        if mark is not None:
            parts.append(mark)
        has_sidecar = bool(parts)
        files = self.files_under(f"{path}/{DOC}")
        if not files:  # a link: the problem names where it leads (gone meanwhile: nothing)
            try:
                parts.append(b"l" + os.fsencode(os.readlink(f"{path}/{DOC}")))
            except OSError:
                pass
        for rel, st in files:
            parts.append(
                b"%s\0%d.%d" % (rel.encode("utf-8", "surrogateescape"), st.st_size, st.st_mtime_ns)
            )
        if not parts:  # no sidecar, no files: the directory's own time is the item's timestamp
            try:
                parts.append(b"d%d" % os.stat(path).st_mtime_ns)
            except OSError:
                pass
        digest = hashlib.blake2b(b"\n".join(parts), digest_size=16).hexdigest()
        return Found(directory, name, digest, files, has_sidecar)

    def scopes(self) -> Iterator[str]:
        """The collection cut into scopes for `items`, in key order: each two-segment item and
        each third-level directory (a first build walks them in parallel)."""
        for a in self._subdirs(self.root):
            for b in self._subdirs(f"{self.root}/{a}"):
                two = f"{a}/{b}"
                if self._is_two_item(two):
                    yield two
                else:
                    yield from (f"{two}/{c}" for c in self._subdirs(f"{self.root}/{two}"))

    def items(self, scope: str = "") -> Iterator[Found]:
        """Item directories at or below `scope` (a directory path of 0 to 4 segments), in
        key order; a four-segment one still has to pass `Found.valid()`."""
        segs = scope.split("/") if scope else []
        if len(segs) > 4:
            return
        for i, name in enumerate(segs):
            if name.startswith(".") or not _is_real_dir(os.path.join(self.root, *segs[: i + 1])):
                return
        if len(segs) >= 3 and self._is_two_item("/".join(segs[:2])):
            return  # a two-segment item holds no four-segment items
        root = self.root
        for a in segs[:1] or self._subdirs(root):
            for b in segs[1:2] or self._subdirs(f"{root}/{a}"):
                two = f"{a}/{b}"
                if len(segs) < 3 and self._is_two_item(two):
                    yield self.found(two, ibimod.parse(two))
                    continue
                for c in segs[2:3] or self._subdirs(f"{root}/{two}"):
                    for d in segs[3:4] or self._subdirs(f"{root}/{two}/{c}"):
                        self.dirs += 1
                        yield self.found(f"{two}/{c}/{d}")


def estimate_items(root: str | os.PathLike) -> int:
    """Roughly how many items a collection holds, from its upper levels only (for progress)."""
    walk = Walk(root)
    count = 0
    for a in walk._subdirs(walk.root):
        for b in walk._subdirs(os.path.join(walk.root, a)):
            if ibimod.is_valid(f"{a}/{b}"):
                count += 1
                continue
            for c in walk._subdirs(os.path.join(walk.root, a, b)):
                count += len(walk._subdirs(os.path.join(walk.root, a, b, c)))
    return count


def scope_of(parts: list[str], is_directory: bool) -> str | None:
    """The smallest part of the collection a change at `parts` (path segments below the
    root) can affect, as a scope for `Walk.items`; None when it affects no item."""
    scope = _scope_of(parts, is_directory)
    # An IBI is text: a directory named in bytes that are not UTF-8 (held with lone
    # surrogates) names no item, and SQLite refuses such a key (UnicodeEncodeError stopped
    # the indexer at each event under a Latin-1 name).
    if scope and not scope.isascii():
        try:
            scope.encode("utf-8")
        except UnicodeEncodeError:
            return None
    return scope


def _scope_of(parts: list[str], is_directory: bool) -> str | None:
    n = len(parts)
    if n == 0:
        return ""
    if any(p.startswith(".") for p in parts[:2]):
        return None
    if n <= 2:
        return "/".join(parts) if is_directory else None
    two = f"{parts[0]}/{parts[1]}"
    if parts[2] in (DOC, sidecarmod.SIDECAR):  # the inside of a two-segment item
        return two if ibimod.is_valid(two) else None
    if parts[2].startswith("."):
        return None
    if n == 3:
        return "/".join(parts) if is_directory else None
    if parts[3].startswith("."):
        return None
    four = "/".join(parts[:4])
    if not ibimod.is_valid(four):
        return None
    if n == 4:
        return four if is_directory else None
    if parts[4] == sidecarmod.SIDECAR or parts[4] == DOC:
        return four
    return None


def cover(scopes: Iterable[str]) -> list[str]:
    """The scopes without those inside another, in key order."""
    kept: list[str] = []
    for scope in sorted(set(scopes), key=lambda s: s.split("/") if s else []):
        if scope == "":
            return [""]
        if kept and scope.startswith(kept[-1] + "/"):
            continue
        kept.append(scope)
    return kept
