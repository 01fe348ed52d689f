"""A thread reuses its resolution of the collection root for ROOT_FRESH seconds
(collection.items._resolved_root): the files of one answer are checked against one
resolution of the root, and a root link moved to another tree is followed once that short
time has passed, both by file serving and by the answers' checks."""

from __future__ import annotations

import os
import time
from pathlib import Path

from archive_service.collection import items

ITEM = "example.org/repo/2024/01.02.03.04"


def tree(base: Path, files: list[str]) -> Path:
    doc = base / ITEM / "doc"
    doc.mkdir(parents=True)
    for name in files:
        (doc / name).write_text(name)
    return base


def test_a_moved_root_link_is_followed_after_root_fresh(tmp_path: Path) -> None:
    old = tree(tmp_path / "old", ["both.txt", "only-old.txt"])
    new = tree(tmp_path / "new", ["both.txt", "only-new.txt"])
    root = tmp_path / "collection"
    root.symlink_to(old)

    assert items.resolve_file(root, ITEM, "both.txt") == old / ITEM / "doc" / "both.txt"
    assert items.resolve_file(root, ITEM, "only-old.txt") is not None

    swapped = tmp_path / "swapped"
    swapped.symlink_to(new)
    os.replace(swapped, root)  # as an admin moves a collection link: atomically
    time.sleep(items.ROOT_FRESH * 1.5)

    assert items.resolve_file(root, ITEM, "both.txt") == new / ITEM / "doc" / "both.txt"
    assert items.resolve_file(root, ITEM, "only-old.txt") is None
    assert items.resolve_file(root, ITEM, "only-new.txt") is not None


def test_a_root_link_into_another_item_never_lets_a_file_out(tmp_path: Path) -> None:
    # Within ROOT_FRESH the kept resolution is of this root only: another root asked for
    # in between is resolved for itself.
    first = tree(tmp_path / "first", ["a.txt"])
    second = tree(tmp_path / "second", ["b.txt"])
    assert items.resolve_file(first, ITEM, "a.txt") is not None
    assert items.resolve_file(second, ITEM, "a.txt") is None
    assert items.resolve_file(second, ITEM, "b.txt") == second / ITEM / "doc" / "b.txt"
    assert items.resolve_file(first, ITEM, "b.txt") is None
