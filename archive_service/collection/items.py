"""The collection index: which directories are items, what their sidecars say, and lookups.

A directory is an item when its path relative to the collection is a repository name (four
segments) or an IBIp (two segments, holding `doc/` or `item.yaml`) — SPEC §7. The collection
is the source of truth: `scan` builds this in-memory catalog from it (for `check`, `deposit`
and `delete` without a complete index, and a server with nowhere to write an index), and the
persistent index (index/store.py) is refreshed from it, re-reading only what changed. The item
model and the claim rule both catalogs follow are protocol/catalog.py's.
"""

from __future__ import annotations

import difflib
import errno
import logging
import os
import re
import stat
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from ..common.fsnames import from_os, to_os
from ..protocol import ibi as ibimod
from ..protocol.catalog import (
    DOC,
    Editions,
    Item,
    claim,
    directory_of,
    follow_editions,
    is_served,
    sortkey,
)
from ..protocol.ibi import Forms, Ibi
from . import sidecar as sidecarmod

log = logging.getLogger(__name__)

__all__ = ["DOC", "Editions", "Item", "follow_editions"]  # the item model, from protocol/


@dataclass
class Problem:
    """Something wrong in the collection; `severity` is 'error' or 'warning'."""

    where: str
    message: str
    severity: str = "error"

    def __str__(self) -> str:
        return f"{self.severity}: {self.where}: {self.message}"


# A name with one of these gets no URL: a CR or LF would split a pairs line or a log line
# wherever the name is shown undecoded (issue 15).
CONTROL = re.compile("[\x00-\x1f\x7f-\x9f]")  # a file name holding one gets no URL
# What a served name may not hold: a control character, or a backslash, which `_resolve` (so
# /col/) and a urlRequest's filepath refuse. A single `a\b.pdf` in doc/ was the default
# target, so the item's answer had no url pair at all, and `check` said nothing.
UNSERVED = re.compile("[\x00-\x1f\x7f-\x9f\\\\]")


_O_PATH = getattr(os, "O_PATH", 0)


def _resolved(path: str) -> tuple[str, os.stat_result] | None:
    """The real path of `path` (`os.path.realpath(strict=True)`) and its stat, or None when
    it is missing or a link loop. On Linux the kernel resolves it: an O_PATH descriptor (which
    opens nothing, not even a FIFO) read back through /proc/self/fd costs a fourth of
    realpath's lstat of every component (10 us against 35 us for a file 10 levels down)."""
    try:
        fd = os.open(path, _O_PATH | os.O_CLOEXEC) if _O_PATH else None
    except OSError:
        return None
    try:
        if fd is not None:
            try:
                real = os.readlink(f"/proc/self/fd/{fd}")
                st = os.fstat(fd)
                if real.startswith("/") and st.st_nlink:  # not " (deleted)" or unreachable
                    return real, st
            except OSError:
                pass  # no /proc: as realpath does it
        real = os.path.realpath(path, strict=True)
        return real, os.stat(real)
    except OSError:
        return None
    finally:
        if fd is not None:
            os.close(fd)


# Seconds a thread reuses its resolution of the collection root (see _resolved_root).
ROOT_FRESH = 0.01
_root_kept = threading.local()


def _resolved_root(root: str) -> tuple[str, os.stat_result] | None:
    """`_resolved(root)`, reused by the calling thread for ROOT_FRESH seconds: the checks of
    one answer (three files for a full one, re-checked every second while it is kept)
    resolve the root once instead of once per file, 7 of each file's 25 us here. A root
    link moved to another tree takes effect ROOT_FRESH later, as if the request had come
    that much earlier."""
    now = time.monotonic()
    kept = getattr(_root_kept, "last", None)
    if kept is not None and kept[0] == root and now - kept[1] < ROOT_FRESH:
        return kept[2]
    found = _resolved(root)
    _root_kept.last = (root, now, found)
    return found


def _resolve(
    root: str | os.PathLike, directory: str, relpath: str
) -> tuple[str, os.stat_result] | None:
    """The one rule for "nothing is served from outside an item": the real path (and stat)
    of `relpath` ("" for doc/ itself) of the item at `directory`, or None when it is
    missing, a link loop, or not inside that item's doc/.

    With every link resolved, the path must lie lexically under <real collection
    root>/<directory>/doc, so no symbolic link at doc/ itself or at any level between the
    collection root and the file may lead out of the item's doc/ (a link inside doc/ to
    another place inside the same doc/ is fine). The collection root itself may be a link:
    it is where the admin put the collection."""
    if ".." in relpath.split("/") or "\x00" in relpath or "\\" in relpath:
        return None
    real_root = _resolved_root(to_os(os.fspath(root)))
    if real_root is None:
        return None
    doc = os.path.join(real_root[0], directory, DOC)
    found = _resolved(os.path.join(doc, to_os(relpath)))
    if found is None or not (found[0] == doc or found[0].startswith(doc + os.sep)):
        return None
    return found


def real_in_doc(root: str | os.PathLike, directory: str, relpath: str) -> str | None:
    """The real path of `relpath` (a file or directory, "" for doc/ itself) of the item at
    `directory` if the rule of `_resolve` lets it be served from, else None."""
    found = _resolve(root, directory, relpath)
    return found[0] if found else None


def resolve_file(root: str | os.PathLike, directory: str, relpath: str) -> Path | None:
    """The real path of the file `relpath` of the item at `directory` that /col/ serves and
    answers hand out a URL for (the rule of `_resolve`), or None: also for a directory, and
    for a name holding a control character (CR, LF, ...), which never gets a URL."""
    if not relpath or UNSERVED.search(relpath):
        return None
    found = _resolve(root, directory, relpath)
    if found is None or not stat.S_ISREG(found[1].st_mode):
        return None
    return Path(found[0])


def open_doc(path: str) -> int | None:
    """A descriptor of the directory doc/ at `path` itself, never of where a link there leads
    (a walk that followed doc -> / would walk and count the whole file system); None if it
    is missing, not a directory, or a link."""
    try:
        return os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return None


def files_under(
    directory: str | Path, counter: list[int] | None = None
) -> list[tuple[str, os.stat_result]]:
    """Regular files and symbolic links below the directory doc/ (following no link, doc/
    itself included), as (relative path, lstat), sorted; `counter[0]` counts the
    directories read. The paths are names as kept (fsnames), whatever the locale."""
    found = []
    top = os.fspath(directory)
    fd = open_doc(top)
    if fd is None:
        return found
    stack = [(top, "")]
    while stack:
        path, prefix = stack.pop()
        try:
            # doc/ through the descriptor opened without following it; below it, no link
            # is followed anyway (is_dir and is_file of an entry do not follow).
            entries = os.scandir(path if prefix else fd)
        except OSError:
            if not prefix:
                os.close(fd)
            continue
        if counter is not None:
            counter[0] += 1
        try:
            with entries:
                for entry in entries:
                    try:
                        if entry.is_file(follow_symlinks=False) or entry.is_symlink():
                            found.append(
                                (prefix + from_os(entry.name), entry.stat(follow_symlinks=False))
                            )
                        elif entry.is_dir(follow_symlinks=False):
                            stack.append(
                                (f"{path}/{entry.name}", f"{prefix}{from_os(entry.name)}/")
                            )
                    except OSError:
                        continue
        finally:
            if not prefix:
                os.close(fd)  # after the entries' stats, which read through it
    found.sort()
    return found


def list_files(collection: Path, item: Item) -> list[tuple[str, int]]:
    """The item's files under doc/ with their sizes (for the file-list page): those
    `resolve_file` serves, links within doc/ to its files included."""
    doc = real_in_doc(collection, item.directory, "")
    if doc is None:
        return []  # doc/ is a link, or a level above it leads elsewhere
    listed = []
    for rel, st in files_under(doc):
        if stat.S_ISLNK(st.st_mode):
            real = resolve_file(collection, item.directory, rel)
            if real is not None:
                listed.append((rel, os.stat(real).st_size))
        elif not UNSERVED.search(rel):
            listed.append((rel, st.st_size))
    return listed


def doc_problems(
    root: str, directory: str, files: list[tuple[str, os.stat_result]]
) -> tuple[list[str], list[Problem]]:
    """The names under doc/ a URL may be given for (`resolve_file`'s rule, for `target` and
    `formats`), and a problem for each link leading out of the item's doc/ and each name
    with a control character (for `check`)."""
    doc = os.path.join(root, directory, DOC)
    problems = []
    if not files and os.path.islink(doc):  # the walk gives no files through a link
        problems.append(
            Problem(
                directory, f"doc is a symbolic link to {_readlink(doc)}: nothing under it is served"
            )
        )
    names = []
    for rel, st in files:
        if UNSERVED.search(rel):
            problems.append(
                Problem(
                    directory,
                    f"doc/{rel!r} has a control character or a backslash in its name: "
                    "it gets no URL",
                    "warning",
                )
            )
        elif not stat.S_ISLNK(st.st_mode):
            names.append(rel)
        elif resolve_file(root, directory, rel) is not None:
            names.append(rel)  # a link to a file inside the same doc/
        elif real_in_doc(root, directory, rel) is None:
            problems.append(
                Problem(
                    directory,
                    f"doc/{_shown(rel)} is a symbolic link to "
                    f"{_readlink(os.path.join(doc, to_os(rel)))}: it leads out of the "
                    "item's doc/ (or nowhere, or round a loop) and is not served",
                )
            )
    return names, problems


def _readlink(path: str) -> str:
    try:
        return _shown(from_os(os.readlink(path)))
    except OSError as exc:
        return f"? ({exc.strerror})"


def _shown(name: str) -> str:
    """A name for a problem line: quoted when it holds a control character (a raw CR or LF
    would start a line of its own in check's output or the log)."""
    return repr(name) if CONTROL.search(name) else name


def _utc(seconds: float) -> datetime:
    return datetime.fromtimestamp(int(seconds), tz=UTC)


def subdirectories(
    path: str | os.PathLike, problems: list[Problem] | None = None, where: str = ""
) -> list[str]:
    """The names of the directories in `path` where items may be, sorted: hidden names are
    skipped, and a link to a directory is not followed (what it leads to could be any tree,
    / or the state directory, and it would be neither watched nor confined to the
    collection); with `problems`, each such link is added to it (`where`: `path` relative to
    the collection, ending in "/"). A directory gone meanwhile has none."""
    try:
        with os.scandir(path) as entries:
            found = []
            for e in entries:
                if e.name.startswith("."):
                    continue
                if e.is_dir(follow_symlinks=False):
                    found.append(e.name)
                elif problems is not None and e.is_symlink() and e.is_dir():
                    problems.append(
                        Problem(
                            where + _shown(from_os(e.name)),
                            f"is a symbolic link to {_readlink(e.path)}: "
                            "links are not followed, so nothing under it is served",
                        )
                    )
            return sorted(found)
    except OSError as exc:
        if exc.errno != errno.ENOENT:
            log.warning("cannot read %s: %s", path, exc.strerror)
        return []


def is_two_segment_item(root: str | os.PathLike, two: str) -> bool:
    """Whether the directory `two` (two segments below `root`) is an item: an IBIp holding
    `doc/` or `item.yaml` (SPEC §7). Four-segment items need only a valid name."""
    path = f"{os.fspath(root)}/{two}"
    return ibimod.is_valid(two) and (
        os.path.isdir(f"{path}/{DOC}") or os.path.isfile(f"{path}/{sidecarmod.SIDECAR}")
    )


def item_directories(root: Path, problems: list[Problem] | None = None):
    """Yield the two-segment item directories under `root` and the four-segment directories
    that are items if their names are valid IBIs (not checked here); links to directories at
    the levels that name items are added to `problems` (subdirectories)."""

    def subdirs(path: Path, where: str = ""):
        return subdirectories(path, problems, where)

    for a in subdirs(root):
        for b in subdirs(root / a, f"{a}/"):
            two = f"{a}/{b}"
            if is_two_segment_item(root, two):
                yield two
                continue
            for c in subdirs(root / two, f"{two}/"):
                for d in subdirs(root / two / c, f"{two}/{c}/"):
                    yield f"{two}/{c}/{d}"


def iter_item_dirs(root: Path, problems: list[Problem] | None = None):
    """Yield (relative directory, Ibi) for every item directory under `root` (see
    item_directories)."""
    for directory in item_directories(root, problems):
        if directory.count("/") == 1 or ibimod.is_valid(directory):
            yield directory, ibimod.parse(directory)


def sidecar_mark(item_path: str) -> bytes | None:
    """What an item's item.yaml is, for its fingerprint (index/walk.py); None when it has none.

    One that is there but not a file (a directory, a FIFO) or cannot be looked at (a link
    loop, no permission) is a sidecar all the same: reading it says why it cannot be read, an
    item's problem, where the item was indexed silently without its metadata."""
    try:
        st = os.stat(os.path.join(item_path, sidecarmod.SIDECAR))
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as exc:
        return b"y!%d" % exc.errno
    if stat.S_ISREG(st.st_mode):
        return b"y%d.%d" % (st.st_size, st.st_mtime_ns)
    return b"y%d.%d.%o" % (st.st_size, st.st_mtime_ns, stat.S_IFMT(st.st_mode))


def load_item(
    root: Path,
    directory: str,
    name: Ibi,
    files: list[tuple[str, os.stat_result]] | None = None,
    has_sidecar: bool | None = None,
) -> tuple[Item, list[Problem]]:
    """Build one item from its directory; raise SidecarError if its sidecar is unusable.

    `files` is the item's `files_under(doc/)` listing (a stat of each needs st_mtime and
    st_mode only), and `has_sidecar` whether its item.yaml is a file, when the caller has
    just found out."""
    # os.path, not pathlib: this runs once per item of a first build (a third faster).
    path = os.path.join(root, directory)
    problems: list[Problem] = []
    sidecar_path = os.path.join(path, sidecarmod.SIDECAR)
    if has_sidecar is None:
        has_sidecar = sidecar_mark(path) is not None
    if has_sidecar:
        side = sidecarmod.read(sidecar_path)
        for key in side.unknown_keys:
            near = difflib.get_close_matches(key, sidecarmod.KEYS, n=1)
            hint = f"; did you mean {near[0]}?" if near else ""
            problems.append(
                Problem(
                    f"{directory}/{sidecarmod.SIDECAR}",
                    f"unknown key {key!r} (ignored{hint})",
                    "warning",
                )
            )
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
        files = files_under(os.path.join(path, DOC))
    names, doc_trouble = doc_problems(root, directory, files)
    problems += doc_trouble
    timestamp = side.timestamp
    if timestamp is None:
        times = [st.st_mtime for _, st in files if not stat.S_ISLNK(st.st_mode)]
        if not times and has_sidecar:
            times = [os.stat(sidecar_path).st_mtime]
        timestamp = _utc(max(times) if times else os.stat(path).st_mtime)

    target = side.target
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
        location=side.location,
    )
    return item, problems


def read_item_or_problems(
    root: Path,
    directory: str,
    name: Ibi,
    files: list[tuple[str, os.stat_result]] | None = None,
    has_sidecar: bool | None = None,
) -> tuple[Item | None, list[Problem]]:
    """`load_item`, with an item that cannot be used given as its problems instead (None):
    its sidecar's faults, a read that failed, or, last, anything else that went wrong. One
    item's problem is never the walk's: an exception let through here stopped `check`,
    `index` and `serve`, and made the indexer crash and restart every second (issue 30)."""
    try:
        return load_item(root, directory, name, files, has_sidecar)
    except sidecarmod.SidecarError as exc:
        return None, [Problem(f"{directory}/{sidecarmod.SIDECAR}", p) for p in exc.problems]
    except OSError as exc:
        return None, [Problem(directory, f"cannot read: {exc.strerror}")]
    except Exception as exc:  # noqa: BLE001 - a fault of ours: said, with its traceback
        log.exception("reading the item %s", directory)
        what = type(exc).__name__
        try:
            what += f": {exc}"
        except Exception:  # noqa: BLE001, S110 - a message that cannot even be made
            pass
        return None, [Problem(directory, f"cannot be read ({what}); see the log")]


def position(problem: Problem) -> str:
    """Where a problem of the walk, of an item or of a claim is listed: in collection order
    of the directory it names (an item's sidecar with its item), whichever catalog found
    it; a stable sort keeps an item's own problems in the order they were found."""
    return sortkey(problem.where.removesuffix("/" + sidecarmod.SIDECAR))


def claim_problems(k: str, claimants: Iterable[str], served: Item | None) -> list[Problem]:
    """The problem of each directory (by sortkey) claiming the IBI key `k` that is not the
    one `served` (for `check`; both catalogs report a shared IBI so)."""
    if served is None:
        return []
    return [
        Problem(
            directory_of(key),
            f"IBI {k} is also claimed by {served.directory}; {served.directory} is served",
        )
        for key in sorted(claimants)
        if key != sortkey(served.directory)
    ]


class Catalog:
    """Every item of one collection, found by either form of its IBI in any case: the
    in-memory implementation of `protocol.catalog.Catalog` (`scan` builds it)."""

    def __init__(self, root: Path):
        self.root = Path(root)
        self.items: dict[str, Item] = {}
        self.by_directory: dict[str, Item] = {}
        self.problems: list[Problem] = []
        self.languages: set[str] = set()
        self.has_unlanguaged = False
        self._found: list[Item] = []

    def lookup(self, text: str | Ibi) -> Item | None:
        return self.items.get(ibimod.key(str(text)))

    def item_at(self, directory: str) -> Item | None:
        return self.by_directory.get(directory)

    def answer_cache(self) -> None:
        """Answers are not kept: this catalog changes in place, with nothing to say when."""
        return None

    def add(self, item: Item) -> None:
        """Add an item found by the walk (in collection order); which of the directories
        claiming one IBI is served is decided by `finish`, by the claim rule."""
        self._found.append(item)

    def _claim(self) -> None:
        """Serve the items as the claim rule (protocol.catalog.is_served) decides, deciding
        them in claim order so that every earlier claimant is decided first."""
        claimed: dict[str, list[str]] = {}  # IBI key -> sortkeys of its claimants so far
        served: dict[str, bool] = {}
        found = {sortkey(item.directory): item for item in self._found}
        for key in sorted(found, key=claim):
            item = found[key]
            served[key] = is_served(
                key, item.keys(), lambda k, _mine: claimed.get(k, ()), served.__getitem__
            )
            for k in item.keys():
                claimed.setdefault(k, []).append(key)
        for key, item in found.items():  # in collection order, as the walk found them
            if served[key]:
                for k in item.keys():
                    self.items[k] = item
                self.by_directory[item.directory] = item
        for k, claimants in claimed.items():
            if len(claimants) > 1:
                self.problems += claim_problems(k, claimants, self.items.get(k))
        self.problems.sort(key=position)
        self._found = []

    def finish(self) -> None:
        """Decide the claims, then derive what spans items: reverse translations, the
        language set, edition cycles."""
        self._claim()
        for item in self.by_directory.values():
            if item.language:
                self.languages.add(item.language)
            else:
                self.has_unlanguaged = True
            self.languages.update(item.translations)
        # A translation declared on one side is a translation on both sides.
        for item in list(self.by_directory.values()):
            for ref in list(item.translations.values()):
                other = self.lookup(ref)
                if other is not None and item.language:
                    other.translations.setdefault(item.language, item.name)
        self.problems += edition_cycles(self.by_directory.values(), self.lookup)


def edition_cycles(items: Iterable[Item], lookup: Callable[[Ibi], Item | None]) -> list[Problem]:
    """A problem for each of `items` whose nextedition chain loops (both catalogs): the item
    `follow_editions` meets a second time. Each item of the chains is looked up once: following
    every chain from its start looked the items of a chain of n editions up n*n/2 times (a
    chain of 10,000: `check` took 100 s, and every scan of the in-memory catalog 23 s)."""
    cycle_at: dict[str, Item | None] = {}  # an item's key -> what follow_editions meets twice
    problems = []
    for item in items:
        path: list[Item] = []
        on_path: dict[str, int] = {}
        current: Item | None = item
        met: Item | None = None
        while current is not None and current.name.key not in cycle_at:
            if current.name.key in on_path:  # round a loop: path[i:] is the loop itself
                i = on_path[current.name.key]
                for looped in path[i:]:
                    cycle_at[looped.name.key] = looped
                path, met = path[:i], path[i]
                break
            on_path[current.name.key] = len(path)
            path.append(current)
            current = lookup(current.nextedition) if current.nextedition is not None else None
        else:
            if current is not None:  # joins a chain followed before
                known = cycle_at[current.name.key]
                on_loop = known is not None and known.name.key == current.name.key
                met = current if on_loop else known
        for walked in path:
            cycle_at[walked.name.key] = met
        found = cycle_at[item.name.key]
        if found is not None:
            problems.append(
                Problem(item.directory, f"nextedition chain has a cycle through {found.directory}")
            )
    return problems


def scan(root: Path) -> Catalog:
    """Walk the collection and build its catalog; a broken sidecar skips only its item."""
    root = Path(root)
    catalog = Catalog(root)
    if not root.is_dir():
        raise FileNotFoundError(f"collection {root} is not a directory")
    for directory, name in iter_item_dirs(root, catalog.problems):
        item, problems = read_item_or_problems(root, directory, name)
        catalog.problems.extend(problems)
        if item is not None:
            catalog.add(item)
    catalog.finish()
    return catalog


def check_references(catalog: Catalog) -> list[Problem]:
    """Relations that point at items held here but of the wrong kind (for `check`)."""
    return wrong_references(catalog.by_directory.values(), catalog.lookup)


def wrong_references(items: Iterable[Item], lookup: Callable[[Ibi], Item | None]) -> list[Problem]:
    """`check_references` over `items` (those naming a metadata item or a next edition are
    enough), finding what they name through `lookup` (either catalog's)."""
    problems = []
    for item in items:
        if item.metadata is not None:
            meta = lookup(item.metadata)
            if meta is not None and meta.contenttype != "Metadata":
                problems.append(
                    Problem(
                        item.directory,
                        f"metadata {item.metadata} is held here "
                        "but its contenttype is not Metadata",
                    )
                )
        if item.nextedition is not None and item.nextedition.key in item.keys():
            problems.append(Problem(item.directory, "nextedition names the item itself"))
    return problems
