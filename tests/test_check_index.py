"""`archive-service check` reads a complete persistent index instead of every sidecar (issue
17): after refreshing it (what changed is read again, and only that), it prints what a full
read of the collection prints, problem for problem, and the same count."""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import hypothesis
import pytest
from hypothesis import strategies as st

from archive_service.cli import main
from archive_service.collection import items as index
from archive_service.protocol import ibi as ibimod
from archive_service.protocol.catalog import Item, follow_editions
from archive_service.protocol.ibi import Forms
from support import ROOT, break_collection

ITEM = "sid.inpe.br/mtc-m19/2013/09.04.12.27.57"


def break_it(collection: Path, tmp_path: Path) -> None:
    """Every kind of problem check reports (support.break_collection), and links: out of an
    item's doc/, and at an upper level of the collection."""
    break_collection(collection)
    (collection / ITEM / "doc" / "out.txt").symlink_to(tmp_path)
    (collection / "iconet.com.br/banon/2010").rename(tmp_path / "2010")
    (collection / "iconet.com.br/banon/2010").symlink_to(tmp_path / "2010")


def check(capsys, collection: Path) -> tuple[int, list[str]]:
    code = main(["check", str(collection)])
    return code, capsys.readouterr().out.splitlines()


# Runs `check` in a fresh process counting the item.yaml files it opens.
COUNTED = """
import sys
from archive_service.cli import main
from archive_service.collection import items as index
opened = []
sys.addaudithook(lambda event, args: opened.append(1) if event == "open"
                 and str(args[0]).endswith("/item.yaml") else None)
try:
    main(["check", sys.argv[1]])
finally:
    print("OPENED", len(opened))
"""


def sidecars_opened(collection: Path, state: Path) -> int:
    out = subprocess.run(
        [sys.executable, "-c", COUNTED, str(collection)],
        env={"ARCHIVE_SERVICE_STATE_DIR": str(state), "PYTHONPATH": str(ROOT), "PATH": ""},
        capture_output=True,
        text=True,
        timeout=120,
    ).stdout
    return int(out.rsplit("OPENED", 1)[1])


def build_index(collection: Path, state: Path) -> None:
    subprocess.run(
        [sys.executable, "-m", "archive_service.cli", "index", "--collection", str(collection)],
        env={"ARCHIVE_SERVICE_STATE_DIR": str(state), "PYTHONPATH": str(ROOT), "PATH": ""},
        check=True,
        capture_output=True,
        timeout=120,
    )


def test_check_from_the_index_prints_what_a_full_read_prints(
    collection, tmp_path, capsys, monkeypatch
):
    break_it(collection, tmp_path)
    monkeypatch.setenv("ARCHIVE_SERVICE_STATE_DIR", str(tmp_path / "none"))
    scanned = check(capsys, collection)
    assert scanned[0] == 1 and len(scanned[1]) == 8, scanned
    monkeypatch.setenv("ARCHIVE_SERVICE_STATE_DIR", str(tmp_path / "state"))
    assert main(["index", "--collection", str(collection)]) == 0
    capsys.readouterr()
    assert check(capsys, collection) == scanned
    # A change since the index was built is in check's output at once.
    (collection / "dpi.inpe.br/banon/2003/12.10.19.30/item.yaml").write_text("state: Copy\n")
    code, lines = check(capsys, collection)
    assert [line for line in scanned[1] if "colour" not in line][:-1] == lines[:-1]
    monkeypatch.setenv("ARCHIVE_SERVICE_STATE_DIR", str(tmp_path / "none"))
    assert check(capsys, collection) == (code, lines)


def test_check_passes_from_the_index_of_the_sample(collection, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("ARCHIVE_SERVICE_STATE_DIR", str(tmp_path / "state"))
    main(["index", "--collection", str(collection)])
    capsys.readouterr()
    assert check(capsys, collection) == (0, [f"{collection}: 15 items, no problems"])


@pytest.mark.process
def test_check_with_a_complete_index_reads_only_what_changed(collection, tmp_path):
    state = tmp_path / "state"
    assert sidecars_opened(collection, state) >= 10  # no index: every sidecar
    build_index(collection, state)
    assert sidecars_opened(collection, state) == 0
    (collection / ITEM / "item.yaml").write_text("language: en\n")
    assert sidecars_opened(collection, state) == 1
    assert sidecars_opened(collection, state) == 0


@pytest.mark.process
@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to give the index to another user")
def test_check_leaves_another_users_index_alone(collection, tmp_path):
    """Run by root beside the service's index, check writes nothing of it (files it made
    would be root's, which the service could not write): it reads the collection instead."""
    state = tmp_path / "state"
    build_index(collection, state)
    (collection / ITEM / "item.yaml").write_text("language: en\n")
    index_files = sorted((state / "index").iterdir())
    for path in index_files:
        os.chown(path, 65534, 65534)
    before = {p: p.stat().st_mtime_ns for p in index_files}
    assert sidecars_opened(collection, state) >= 10
    assert sorted((state / "index").iterdir()) == index_files
    assert {p: p.stat().st_mtime_ns for p in index_files} == before


def test_a_long_edition_chain_is_checked_in_one_pass(tmp_path, capsys):
    """Every item's chain was followed from its start: a chain of n editions cost n*n/2
    look-ups (10,000 editions: `check` took 100 s with the index, 23 s without, and every
    scan of the in-memory catalog as long). Each item is now looked up once; the cycles found
    are the same."""
    root = tmp_path / "collection"
    n = 400
    names = [f"sid.inpe.br/mtc-m99/2020/01.01.{i // 60:02d}.{i % 60:02d}" for i in range(n)]
    for i, name in enumerate(names):
        (root / name / "doc").mkdir(parents=True)
        (root / name / "doc" / "a.txt").write_text("x")
        # The last ten editions loop back to the tenth from the end.
        nxt = names[i + 1] if i + 1 < n else names[n - 10]
        (root / name / "item.yaml").write_text(f"nextedition: {nxt}\n")
    catalog = index.scan(root)
    looked_up = []

    def lookup(ref):
        looked_up.append(ref)
        return catalog.lookup(ref)

    problems = index.edition_cycles(catalog.by_directory.values(), lookup)
    assert len(looked_up) <= n
    assert [p.where for p in problems] == names
    assert all(p.message.endswith(f"cycle through {names[n - 10]}") for p in problems[:-10])
    assert [p.message.rsplit(" ", 1)[1] for p in problems[-10:]] == names[-10:]
    settings = {"collection": str(root), "state_dir": str(tmp_path / "state")}
    assert (
        main(
            ["index", "--collection", settings["collection"], "--state-dir", settings["state_dir"]]
        )
        == 0
    )
    capsys.readouterr()
    assert main(["check", str(root), "--state-dir", settings["state_dir"]]) == 1
    out = capsys.readouterr().out
    assert out.count("nextedition chain has a cycle through") == n


def _naive_cycles(items, lookup):
    """The cycle check as it was: follow_editions (the one rule of following a chain) from
    every item. edition_cycles walks the same links once for all; they must agree."""
    return [
        (item.directory, chain.cycle_at.directory)
        for item in items
        if (chain := follow_editions(lookup, item)).cycle_at is not None
    ]


@hypothesis.settings(max_examples=300, deadline=None)
@hypothesis.given(
    st.lists(st.one_of(st.none(), st.integers(0, 14)), min_size=1, max_size=12),
    st.randoms(use_true_random=False),
)
def test_the_one_pass_cycle_check_agrees_with_following_each_chain(links, rng):
    # links[i]: the next edition of item i (an index; one past the items is held elsewhere).
    names = [ibimod.parse(f"sid.inpe.br/mtc-m99/2020/01.01.00.{i:02d}") for i in range(15)]
    items = [
        Item(
            directory=names[i].text,
            name=names[i],
            forms=Forms.of(names[i]),
            state="Original",
            contenttype="Data",
            language=None,
            timestamp=datetime(2020, 1, 1, tzinfo=UTC),
            target=None,
            nextedition=None if nxt is None else names[nxt],
        )
        for i, nxt in enumerate(links)
    ]
    rng.shuffle(items)
    by_key = {item.name.key: item for item in items}

    def lookup(ref):
        return by_key.get(ref.key)

    found = [(p.where, p.message.rsplit(" ", 1)[1]) for p in index.edition_cycles(items, lookup)]
    assert found == _naive_cycles(items, lookup)
