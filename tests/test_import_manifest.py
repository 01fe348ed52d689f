"""Manifests (imports/manifest.py, issue 21): CSV and YAML read into records, every fault one
line with file:line, and the attacks: files named by `..`, absolute paths and symbolic links
leading out of the manifest's tree, files that are not regular, huge manifests."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from archive_service.imports import manifest
from archive_service.imports.apply import ImportRefused
from serve_process import command, run_command

HEADER = "id,files,location,title\n"


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    tree = tmp_path / "repo"
    tree.mkdir()
    (tree / "one.pdf").write_bytes(b"%PDF one")
    (tree / "sub").mkdir()
    (tree / "sub" / "two.pdf").write_bytes(b"%PDF two")
    (tmp_path / "secret.txt").write_text("not for the public")
    return tree


def problems_of(path: Path, root: Path | None = None) -> list[str]:
    with pytest.raises(ImportRefused) as caught:
        manifest.read(path, root)
    return caught.value.problems


def test_csv_and_yaml_give_the_same_records(tree):
    csv_path = tree / "m.csv"
    csv_path.write_text(
        "id,files,location,title,language,edition_of\n"
        "a,one.pdf;sub/two.pdf,,Title A,en,\n"
        "b,,https://repo.example.org/b,Title B,,a\n"
    )
    yaml_path = tree / "m.yaml"
    yaml_path.write_text(
        "- id: a\n  files: [one.pdf, sub/two.pdf]\n  title: Title A\n  language: en\n"
        "- id: b\n  location: https://repo.example.org/b\n  title: Title B\n  edition_of: a\n"
    )
    from_csv, from_yaml = manifest.read(csv_path), manifest.read(yaml_path)
    assert [r.files for r in from_csv] == [(tree / "one.pdf", tree / "sub/two.pdf"), ()]
    strip = [{**vars(r), "where": None} for r in from_csv]
    assert strip == [{**vars(r), "where": None} for r in from_yaml]
    assert [r.where for r in from_yaml] == [f"{yaml_path}:1", f"{yaml_path}:5"]
    assert from_csv[1].relations == {"edition_of": "a"}


@pytest.mark.parametrize(
    "name, why",
    [
        ("../secret.txt", "climbs out with '..'"),
        ("sub/../../secret.txt", "climbs out with '..'"),
        ("{tmp}/secret.txt", "outside"),
        ("/etc/passwd", "outside"),
        ("link.txt", "outside"),  # a symbolic link to ../secret.txt
        ("sublink/secret.txt", "outside"),  # a linked directory leading out
        ("sub", "not a regular file"),
        ("fifo", "not a regular file"),
        ("missing.pdf", "No such file or directory"),
    ],
)
def test_files_outside_the_manifests_tree_are_refused(tree, tmp_path, name, why):
    os.symlink(tmp_path / "secret.txt", tree / "link.txt")
    os.symlink(tmp_path, tree / "sublink")
    os.mkfifo(tree / "fifo")
    path = tree / "m.csv"
    path.write_text(HEADER + f"ok,one.pdf,,\nbad,{name.format(tmp=tmp_path)},,\n")
    (problem,) = problems_of(path)
    assert problem.startswith(f"{path}:3: files: ") and why in problem


def test_a_link_inside_the_tree_is_followed(tree):
    os.symlink("sub/two.pdf", tree / "alias.pdf")
    path = tree / "m.csv"
    path.write_text(HEADER + "a,alias.pdf,,\n")
    (record,) = manifest.read(path)
    assert record.files == (tree / "sub" / "two.pdf",)


def test_root_widens_or_narrows_where_files_may_be(tree, tmp_path):
    path = tree / "m.csv"
    path.write_text(HEADER + "a,../secret.txt,,\n")
    assert "climbs out" in problems_of(path, root=tmp_path)[0]  # '..' never
    path.write_text(HEADER + f"a,{tmp_path}/secret.txt,,\n")
    assert manifest.read(path, root=tmp_path)[0].files == (tmp_path / "secret.txt",)


@pytest.mark.parametrize(
    "text, line, why",
    [
        ("id,files,colour\n", 1, "unknown column(s) 'colour'"),
        ("files,title\n", 1, "no id column"),
        ("id,id\n", 1, "named twice"),
        ("", 1, "empty"),
        ('id,files\na,"one.pdf\n', 2, "unexpected end of data"),
        ("id,files\na,one.pdf,x,y\n", 2, "more than the 2 columns"),
        ("id,date\na,yesterday\n", 2, "not YYYY"),
        ("id,title\n,A title\n", 2, "no id"),
    ],
)
def test_a_bad_csv_says_where(tree, text, line, why):
    path = tree / "m.csv"
    path.write_text(text)
    (problem,) = problems_of(path)
    assert problem.startswith(f"{path}:{line}: ") and why in problem


@pytest.mark.parametrize(
    "text, line, why",
    [
        ("- id: a\n  files: [one.pdf\n", 3, "YAML syntax error"),
        ("id: a\n", 1, "must be a list of items"),
        ("- id: a\n- [x]\n", 2, "must be a map"),
        ("- id: a\n  colour: red\n", 2, "unknown key 'colour'"),
        ("- id: a\n  title: {x: 1}\n", 2, "title must be text"),
        ("- id: a\n  files: [[one.pdf]]\n", 2, "files must be text or a list of texts"),
        # A small file standing for a huge one through aliases: nothing nested is read.
        ("- id: a\n  files: &x [one.pdf]\n- id: b\n  files: [*x, *x]\n", 4, "an alias (*x)"),
        # A second document was never read: its rows, if imported before, became tombstones.
        ("- id: a\n  files: one.pdf\n---\n- id: b\n  files: one.pdf\n", 3, "second YAML document"),
        ("- id: a\n  files: one.pdf\n...\n---\n- id: b\n", 4, "second YAML document"),
    ],
)
def test_a_bad_yaml_manifest_says_where(tree, text, line, why):
    path = tree / "m.yaml"
    path.write_text(text)
    (problem,) = problems_of(path)
    assert problem.startswith(f"{path}:{line}: ") and why in problem


def test_a_huge_cell_is_refused_not_read(tree):
    path = tree / "m.csv"
    path.write_text(HEADER + "a,one.pdf,," + "x" * (manifest.MAX_FIELD + 10) + "\n")
    (problem,) = problems_of(path)
    assert problem.startswith(f"{path}:2: ") and "field larger than field limit" in problem


def test_a_manifest_of_100000_rows_is_read_in_seconds(tree, tmp_path):
    path = tree / "m.csv"
    with open(path, "w") as out:
        out.write(HEADER)
        for n in range(100_000):
            out.write(f"r{n},,https://repo.example.org/handle/1/{n},Item {n}\n")
    started = time.monotonic()
    records = manifest.read(path)
    took = time.monotonic() - started
    assert len(records) == 100_000 and records[-1].where == f"{path}:100001"
    assert took < 20, took


def test_problems_beyond_the_first_hundreds_are_counted_not_listed(tree, tmp_path):
    path = tree / "m.csv"
    path.write_text(HEADER + "".join(f"r{n},missing{n}.pdf,,\n" for n in range(1000)))
    problems = problems_of(path)
    assert len(problems) == manifest.MAX_PROBLEMS + 1
    assert problems[-1] == f"... and {1000 - manifest.MAX_PROBLEMS} more problem(s)"


@pytest.mark.process
def test_the_command_refuses_a_bad_manifest_with_one_line_per_row(tree, tmp_path):
    path = tree / "m.csv"
    path.write_text(HEADER + "a,one.pdf,,\nb,../secret.txt,,\nc,,gopher://x.example.org/,\n")
    collection = tmp_path / "collection"
    collection.mkdir()
    common = ["--collection", str(collection), "--state-dir", str(tmp_path / "state")]
    common += ["--archiveaddress", "archive.example.org"]
    done = run_command(["import", "manifest", str(path), *common])
    assert done.returncode == 1
    lines = done.stderr.splitlines()
    assert lines[0].startswith(f"{path}:3: files: '../secret.txt' climbs out")
    assert lines[1].startswith(f"{path}:4: location: ")
    assert lines[2] == "archive-service import manifest: refused, nothing changed"
    assert not any(collection.iterdir())
    path.write_text(HEADER + "a,one.pdf,,\nb,,https://repo.example.org/b,\n")
    done = run_command(["import", "manifest", str(path), "--dry-run", *common])
    assert done.returncode == 0 and not any(collection.iterdir())
    assert done.stdout.splitlines()[0] == f"mint a ({path}:2)"
    assert done.stdout.splitlines()[-1].startswith("dry run: 2 would be minted")
    done = run_command(["import", "manifest", str(path), *common])
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("2 minted, 0 updated")
    done = run_command(["import", "manifest", str(path), *common])
    assert done.stdout.startswith("0 minted, 0 updated") and "2 unchanged" in done.stdout


@pytest.mark.process
def test_a_full_collection_stops_the_command_with_a_line_and_a_rerun_goes_on(
    tree, tmp_path, small_disk
):
    import subprocess

    disk = small_disk("2m")
    (tree / "big.pdf").write_bytes(os.urandom(3_000_000))
    path = tree / "m.csv"
    path.write_text(HEADER + "a,one.pdf,,\nb,big.pdf,,\n")
    common = ["--collection", str(disk), "--state-dir", str(tmp_path / "state")]
    common += ["--archiveaddress", "archive.example.org"]
    done = run_command(["import", "manifest", str(path), *common])
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    assert done.stderr.splitlines()[-1].startswith("archive-service import manifest: stopped: ")
    assert "No space left on device" in done.stderr and "run again to go on" in done.stderr
    remount = ["mount", "-o", "remount,size=8m", str(disk)]
    subprocess.run(remount, check=True)
    done = run_command(["import", "manifest", str(path), *common])
    # a, minted before the disk filled, is as the row says: not copied again (its first
    # copy was kept aside as .replaced-doc-*, doubling what the cut-short run had copied).
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("1 minted, 0 updated") and "1 unchanged" in done.stdout
    assert len(list(disk.rglob("item.yaml"))) == 2
    assert not list(disk.rglob(".replaced-doc-*"))


@pytest.mark.process
def test_a_progress_bar_shows_on_a_terminal_only(tree, tmp_path):
    import pty

    path = tree / "m.csv"
    path.write_text(HEADER + "".join(f"r{n},,https://repo.example.org/{n},\n" for n in range(30)))
    common = ["--collection", str(tmp_path / "c"), "--state-dir", str(tmp_path / "state")]
    common += ["--archiveaddress", "archive.example.org"]
    (tmp_path / "c").mkdir()
    main, terminal = pty.openpty()
    try:
        child = command(["import", "manifest", str(path), *common], stderr=terminal)
        assert child.wait(60) == 0
        os.close(terminal)
        terminal = None
        shown = b""
        while True:
            try:
                chunk = os.read(main, 65536)
            except OSError:  # EIO: the terminal's other end is closed and drained
                break
            if not chunk:
                break
            shown += chunk
    finally:
        os.close(main)
        if terminal is not None:
            os.close(terminal)
    assert b"\rimport [" in shown and b"] 30/30 " in shown
    path.write_text(HEADER + "r0,,https://repo.example.org/0,changed\n")
    done = run_command(["import", "manifest", str(path), *common])  # stderr a pipe: no bar
    assert done.returncode == 0 and "import [" not in done.stderr


def test_a_long_yaml_manifest_costs_the_memory_of_its_rows_as_csv_does(tree):
    import tracemalloc

    rows = 20_000
    csv_path, yaml_path = tree / "m.csv", tree / "m.yaml"
    csv_path.write_text(
        HEADER + "".join(f"r{n},,https://repo.example.org/{n},Item {n}\n" for n in range(rows))
    )
    yaml_path.write_text(
        "".join(
            f"- id: r{n}\n  location: https://repo.example.org/{n}\n  title: Item {n}\n"
            for n in range(rows)
        )
    )
    peaks = []
    for path in (csv_path, yaml_path):
        tracemalloc.start()
        try:
            assert len(manifest.read(path)) == rows
            peaks.append(tracemalloc.get_traced_memory()[1])
        finally:
            tracemalloc.stop()
    # Composing the whole YAML document first took 40 bytes of nodes per byte of manifest.
    assert peaks[1] < 1.5 * peaks[0], peaks


def test_what_a_manifest_says_reaches_the_terminal_escaped(tree, tmp_path):
    """An id is someone else's text: a line break in it forged a line of ours on the admin's
    terminal, and an escape sequence drove it (cleared the screen, hid the refusal)."""
    path = tree / "m.csv"
    path.write_text(HEADER + '"a\x1b[2J\nskipped: b",one.pdf,,\n', newline="")
    collection = tmp_path / "collection"
    collection.mkdir()
    common = ["--collection", str(collection), "--state-dir", str(tmp_path / "state")]
    common += ["--archiveaddress", "archive.example.org"]
    done = run_command(["import", "manifest", str(path), "--dry-run", *common])
    assert done.returncode == 0, done.stderr
    assert "\x1b" not in done.stdout and "\nskipped: b" not in done.stdout
    assert done.stdout.splitlines()[0] == f"mint a\\x1b[2J\\nskipped: b ({path}:2)"


def test_the_command_counts_a_translation_among_the_relations_set(tree, tmp_path, capsys):
    # Issue 34: a manifest whose one relation is a translation printed "0 relations set"
    # while `translations` was written into the translation's item.yaml. A translation is
    # one relation: written on one side only (the index derives the other).
    from archive_service.cli import main

    path = tree / "m.csv"
    path.write_text(
        "id,files,location,title,language,translation_of\n"
        "a,one.pdf,,One,en,\n"
        "a-pt,,https://repo.example.org/a-pt,Um,pt,a\n"
    )
    common = ["--collection", str(tmp_path / "c"), "--state-dir", str(tmp_path / "state")]
    common += ["--archiveaddress", "archive.example.org"]
    (tmp_path / "c").mkdir()
    assert main(["import", "manifest", str(path), "--dry-run", *common]) == 0
    out = capsys.readouterr().out.splitlines()
    assert "1 relations would be set" in out[-1], out[-1]
    assert main(["import", "manifest", str(path), "--verbose", *common]) == 0
    out = capsys.readouterr().out.splitlines()
    assert "1 relations set" in out[-1], out[-1]
    written = [a for a in out if a.startswith("set translations ")]
    assert len(written) == 1, out
    sidecars = [p.read_text() for p in (tmp_path / "c").rglob("item.yaml")]
    assert sum("translations:" in s for s in sidecars) == 1  # as counted
    assert main(["import", "manifest", str(path), *common]) == 0
    assert "0 relations set" in capsys.readouterr().out  # nothing written again
    path.write_text(path.read_text().replace("Um,pt,a", "Um,pt,"))
    assert main(["import", "manifest", str(path), "--verbose", *common]) == 0
    out = capsys.readouterr().out.splitlines()
    assert "1 relations set" in out[-1] and any(a.startswith("took translations ") for a in out)
    assert not any("translations:" in p.read_text() for p in (tmp_path / "c").rglob("item.yaml"))
