"""What changed in a collection since a moment, found without reading what did not: the
repair after an inotify queue overflow (the kernel dropped the events of a while, so the
indexer cannot know from them what changed then; issue 35).

The clock that cannot be set back is each inode's change time (ctime): the kernel sets it to
now whenever anything of the inode changes, and no call sets it to another time (`touch -d`
and `rsync -t` set mtimes, which is why mtimes are not compared). So everything changed while
events were dropped has a ctime at or after the moment the events were last whole (`since`):

- a directory whose entries were added, removed or renamed: its own ctime (an item made,
  deleted or renamed moves its parent's; item.yaml or doc/ replaced by a rename, a link
  swapped in the item or in doc/: the directory holding it);
- a file rewritten in place (item.yaml edited, a file of doc/ overwritten), or its times or
  mode changed: its own ctime, and the files of an item are the ones its fingerprint is made
  of (walk.Walk.found): item.yaml (followed, as the walk stats it), and every entry below
  doc/ (not followed);
- a directory renamed or moved in: its own ctime as well; and, not to rely on that, the
  directories above items whose ctime moved have their subdirectories compared with the
  index's (names on one side only are changed places: moved in, or gone).

Each changed place goes to the ordinary partial refresh (store.Writer.refresh with scopes),
which reads only items whose fingerprint differs, exactly as if its events had been heard.
What this costs is one stat per directory above items and per item, one listing of doc/ and
one stat per file: no sidecar is parsed and the index is not read but for the directories
whose entries changed. The host/word directories are looked at in parallel reading processes
(readers._Readers) for a big collection.
"""

from __future__ import annotations

import os
import sqlite3
import stat
from collections.abc import Iterable, Iterator

from ..collection import items
from ..collection import sidecar as sidecarmod
from ..protocol.catalog import DOC, SEP, sortkey
from .walk import cover, scope_of

# ctimes come from the kernel's coarse clock (a tick behind the wall clock), and file systems
# keep them to their own granularity (whole seconds on some): a margin before `since`.
MARGIN_NS = 2_000_000_000
# From this many directories (the last full walk's count), the look runs in reading processes.
PARALLEL_DIRS = 40_000


def _item_changed(path: str, since: int) -> bool:
    """Whether anything an item's fingerprint is made of changed at or after `since` (the
    item directory's own ctime is the caller's). In doubt (unreadable): changed."""
    try:
        if os.stat(f"{path}/{sidecarmod.SIDECAR}").st_ctime_ns >= since:
            return True
    except FileNotFoundError:
        pass
    except OSError:
        return True
    top = f"{path}/{DOC}"
    fd = items.open_doc(top)
    if fd is None:  # none, or a link (the walk follows none): its own entry tells
        try:
            return os.lstat(top).st_ctime_ns >= since
        except FileNotFoundError:
            return False
        except OSError:
            return True
    try:
        if os.fstat(fd).st_ctime_ns >= since:
            return True
        # doc/ through the descriptor opened without following it, as items.files_under
        stack: list[tuple[str | int, str]] = [(fd, top)]
        while stack:
            where, at = stack.pop()
            with os.scandir(where) as entries:
                for entry in entries:
                    st = entry.stat(follow_symlinks=False)
                    if st.st_ctime_ns >= since:
                        return True
                    if stat.S_ISDIR(st.st_mode):
                        stack.append((f"{at}/{entry.name}", f"{at}/{entry.name}"))
        return False
    except OSError:
        return True
    finally:
        os.close(fd)


def _entries(path: str) -> Iterator[tuple[str, int]]:
    """(name, ctime) of the real, unhidden subdirectories of `path` (items.subdirectories'
    rule), from one listing and an lstat each."""
    with os.scandir(path) as entries:
        for entry in entries:
            if entry.name.startswith(".") or not entry.is_dir(follow_symlinks=False):
                continue
            try:
                yield entry.name, entry.stat(follow_symlinks=False).st_ctime_ns
            except OSError:
                yield entry.name, 1 << 62  # in doubt: changed


def changed_below(root: str, two: str, since: int) -> tuple[list[str], list[str]]:
    """In one host/word directory `two`: the places changed at or after `since` (item
    directories, or whole subtrees) and the year directories whose entries changed (their
    subdirectories are compared with the index's by the caller)."""
    changed: list[str] = []
    levels: list[str] = []
    path = f"{root}/{two}"
    try:
        if items.is_two_segment_item(root, two):  # its own ctime: _units and _compared
            return ([two] if _item_changed(path, since) else []), []
        for year, ctime in _entries(path):
            if ctime >= since:
                levels.append(f"{two}/{year}")
            try:
                for name, item_ctime in _entries(f"{path}/{year}"):
                    where = f"{two}/{year}/{name}"
                    if item_ctime >= since or _item_changed(f"{root}/{where}", since):
                        changed.append(where)
            except OSError:
                changed.append(f"{two}/{year}")
    except OSError:
        changed.append(two)
    return changed, levels


def _indexed_children(conn: sqlite3.Connection, directory: str) -> set[str]:
    """The names of the subdirectories of `directory` that hold items in the index (one
    look-up per name: each skips the subtree of the one before)."""
    prefix = sortkey(directory) + SEP if directory else ""
    names: set[str] = set()
    low = prefix
    while True:
        row = conn.execute(
            "SELECT sortkey FROM items WHERE sortkey > ? AND sortkey < ? ORDER BY sortkey LIMIT 1",
            (low, prefix + "\U0010ffff"),
        ).fetchone()
        if row is None or not row[0].startswith(prefix):
            return names
        name = row[0][len(prefix) :].split(SEP, 1)[0]
        names.add(name)
        low = prefix + name + "\x02"  # past every key of its subtree


def _compared(root: str, conn: sqlite3.Connection, levels: Iterable[str]) -> set[str]:
    """The subdirectories of each directory in `levels` that are on one side only, the disk's
    or the index's: moved in or made (whatever their ctime says), or gone."""
    places = set()
    for level in levels:
        if (
            level.count("/") == 1
            and conn.execute("SELECT 1 FROM items WHERE sortkey = ?", (sortkey(level),)).fetchone()
        ):
            places.add(level)  # a two-segment item whose entries changed (perhaps no more one)
        on_disk = set(items.subdirectories(f"{root}/{level}" if level else root))
        for name in on_disk ^ _indexed_children(conn, level):
            places.add(f"{level}/{name}" if level else name)
    return places


def _units(root: str, since: int, changed: list[str], levels: list[str]) -> Iterator[str]:
    """The host/word directories to look into; the root and hosts on the way are looked at
    here (their own ctimes)."""
    try:
        if os.stat(root).st_ctime_ns >= since:
            levels.append("")
        hosts = list(_entries(root))
    except OSError:
        changed.append("")
        return
    for host, ctime in hosts:
        if ctime >= since:
            levels.append(host)
        try:
            words = list(_entries(f"{root}/{host}"))
        except OSError:
            changed.append(host)
            continue
        for word, word_ctime in words:
            if word_ctime >= since:
                levels.append(f"{host}/{word}")
            yield f"{host}/{word}"


def changed_since(
    store, since: int, *, workers: int | None = None, margin: int = MARGIN_NS
) -> list[str]:
    """The scopes (walk.scope_of, covered) of everything in `store`'s collection changed at
    or after `since` - `margin` (nanoseconds since the epoch), for a partial refresh.
    `workers`: reading processes (default: one per CPU for a big collection, else none)."""
    from .readers import _cpus, _Readers

    root = store.real_root
    since -= margin
    if workers is None:
        workers = _cpus() if int(store.meta().get("dirs", "0")) >= PARALLEL_DIRS else 0
    changed: list[str] = []
    levels: list[str] = []
    readers = _Readers(root, workers) if workers else None
    try:
        units = _units(root, since, changed, levels)
        looked = (
            readers.changes(units, since)
            if readers is not None
            else (changed_below(root, two, since) for two in units)
        )
        for places, years in looked:
            changed += places
            levels += years
    finally:
        if readers is not None:
            readers.close()
    if levels:
        conn = store.connect(readonly=True)
        try:
            changed += _compared(root, conn, levels)
        finally:
            conn.close()
    scopes = {scope_of(place.split("/"), True) for place in changed}
    return cover(scope for scope in scopes if scope is not None)
