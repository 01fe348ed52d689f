"""Changing an item's existing item.yaml: atomically, keeping what a person wrote in it.

PyYAML does not keep comments, so a change is a line-level edit: the top-level block of each
changed key (its `key:` line and the indented or `- ` lines under it) is replaced, or appended
at the end when the key is new; every other line — other keys, comments, blank lines, quoting
— stays byte for byte. The edit is then proven: the new text must load to exactly the old
data with the changes applied, and pass the sidecar schema. When it does not (a flow-style
top-level map, anchors, a `...` end marker, a key written twice), the file is re-serialised
from the data instead: the comment lines at its top are kept, the others are lost, and
`Update.comments_kept` is False so the caller can say so.

Writing is `stage` (a dot-named temporary file in the item's directory, fsync) then `commit`
(os.replace, fsync of the directory): readers — the service, a watcher — see the old file or
the new one, never a mix. Staging before committing lets a caller prepare every file it will
change before it changes any.
"""

from __future__ import annotations

import os
import re
import secrets
import stat
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from ..common import files
from ..common.yamlsafe import SafeLoader as _Loader
from ..common.yamlsafe import dump_sidecar
from . import sidecar as sidecarmod


@dataclass
class Update:
    """The new text of one sidecar, ready to stage and commit."""

    path: Path
    text: str
    comments_kept: bool
    temporary: Path | None = None


def load(path: Path) -> tuple[str, dict[str, Any]]:
    """The text and data of a sidecar ('' and {} when there is none); SidecarError if unusable."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return "", {}
    except (OSError, UnicodeDecodeError) as exc:
        raise sidecarmod.SidecarError(str(path), [f"cannot read: {exc}"]) from None
    problem = sidecarmod.bounds_problem(text.encode("utf-8"))
    if problem is not None:
        raise sidecarmod.SidecarError(str(path), [f"{problem}; fix it first"])
    try:
        data = yaml.load(text, Loader=_Loader)
    except yaml.YAMLError as exc:
        raise sidecarmod.SidecarError(
            str(path), [f"not valid YAML ({exc}); fix it first"]
        ) from None
    if data is None:
        data = {}
    sidecarmod.parse(data, str(path))  # refuse to build on a sidecar that is already broken
    return text, data


def _dump(data: Mapping[str, Any]) -> str:
    return dump_sidecar(data)


def _key_line(key: str) -> re.Pattern:
    quoted = re.escape(key)
    return re.compile(rf"(?:{quoted}|'{quoted}'|\"{quoted}\")[ \t]*:(?:[ \t]|\r?\n|$)")


def _block(lines: list[str], key: str) -> tuple[int, int] | None:
    """[start, end) of the top-level block of `key`, without the blank lines after it."""
    pattern = _key_line(key)
    for start, line in enumerate(lines):
        if pattern.match(line):
            end = start + 1
            for i in range(start + 1, len(lines)):
                line = lines[i]
                if not line.strip():
                    continue
                if line[0] in " \t" or line.startswith("- ") or line.rstrip("\r\n") == "-":
                    end = i + 1
                    continue
                break
            return start, end
    return None


def _edit(
    text: str, changes: Mapping[str, Any], note: str | None, removed: Iterable[str] = ()
) -> str:
    newline = "\r\n" if "\r\n" in text else "\n"
    lines = text.splitlines(keepends=True)
    for key in removed:
        where = _block(lines, key)
        if where is not None:
            del lines[where[0] : where[1]]
    noted = note is None
    for key, value in changes.items():
        block = _dump({key: value}).splitlines(keepends=True)
        if not noted:
            block = [f"# {line}\n" for line in note.splitlines()] + block
            noted = True
        block = [line.replace("\n", newline) for line in block]
        where = _block(lines, key)
        if where is None:
            if lines and not lines[-1].endswith("\n"):
                lines[-1] += newline
            lines += block
        else:
            lines[where[0] : where[1]] = block
    return "".join(lines)


def _regenerate(text: str, data: Mapping[str, Any], note: str | None) -> str:
    head = []
    for line in text.splitlines(keepends=True):
        if not line.startswith("#"):
            break
        head.append(line if line.endswith("\n") else line + "\n")
    head.append(
        "# Rewritten by archive-service: comments below the top of the previous "
        "version were not kept.\n"
    )
    if note:
        head += [f"# {line}\n" for line in note.splitlines()]
    return "".join(head) + _dump(data)


def _comments_below_top(text: str) -> bool:
    """Whether `text` has a comment _regenerate cannot keep (a '#' in a quoted value counts)."""
    lines = text.splitlines()
    top = next((i for i, line in enumerate(lines) if not line.startswith("#")), len(lines))
    return any("#" in line for line in lines[top:])


def prepare(
    path: Path, changes: Mapping[str, Any], note: str | None = None, removed: Iterable[str] = ()
) -> Update:
    """The sidecar at `path` with `changes` (key -> new value) applied and the keys `removed`
    taken out; `note` becomes comment lines above the first changed key. SidecarError if the
    old or the new one is unusable."""
    path = Path(path)
    text, data = load(path)
    removed = [key for key in removed if key in data and key not in changes]
    expected = {k: v for k, v in {**data, **changes}.items() if k not in removed}
    new = _edit(text, changes, note, removed)
    comments_kept = True
    try:
        ok = yaml.load(new, Loader=_Loader) == expected
    except yaml.YAMLError:
        ok = False
    if not ok:
        new = _regenerate(text, expected, note)
        comments_kept = not _comments_below_top(text)
        if yaml.load(new, Loader=_Loader) != expected:  # pragma: no cover - PyYAML round trip
            raise sidecarmod.SidecarError(str(path), ["cannot write the change back as YAML"])
    # Written past the bounds, the sidecar would be refused by the index and by load above.
    problem = sidecarmod.bounds_problem(new.encode("utf-8"))
    if problem is not None:
        raise sidecarmod.SidecarError(str(path), [f"with this change it would be {problem}"])
    sidecarmod.parse(expected, str(path))
    return Update(path, new, comments_kept)


def stage(update: Update) -> None:
    """Write the new text beside the sidecar (dot-named, so never taken for a sidecar)."""
    temporary = update.path.with_name(f".{update.path.name}.{secrets.token_hex(4)}.tmp")
    files.write_new(temporary, update.text)
    try:
        os.chmod(temporary, stat.S_IMODE(update.path.stat().st_mode))  # keep the old mode
    except FileNotFoundError:
        pass
    update.temporary = temporary


def commit(update: Update) -> None:
    """Put the staged text in place in one step."""
    if update.temporary is None:
        stage(update)
    os.replace(update.temporary, update.path)
    update.temporary = None
    files.fsync_dir(update.path.parent)


def discard(update: Update) -> None:
    if update.temporary is not None:
        update.temporary.unlink(missing_ok=True)
        update.temporary = None


def apply(path: Path, changes: Mapping[str, Any], note: str | None = None) -> Update:
    """prepare, stage and commit in one call."""
    update = prepare(path, changes, note)
    try:
        commit(update)
    finally:
        discard(update)
    return update
