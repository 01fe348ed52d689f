"""Applying a source's records (imports/apply.py, issue 21), driven by real manifests under
tmp_path: minted once, re-run mints nothing, changes revise the item, rows gone become
tombstones, relations by the manifest's own ids (also across runs), dry runs write nothing,
and records that cannot be applied are refused before anything changes."""

from __future__ import annotations

import logging
import sqlite3
import threading
from pathlib import Path

import pytest
import webtest

from archive_service.collection import items as index
from archive_service.common import postgres
from archive_service.imports import manifest
from archive_service.imports.apply import ImportRefused, apply
from archive_service.imports.records import Record
from archive_service.stores.mapping.sqlite import FILE as MAPPING_FILE
from archive_service.web import create_app
from support import pairs_of, url_request

HEADER = "id,files,location,title,language,date,edition_of,translation_of,metadata_of\n"


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """A repository's files where they are, beside its manifest."""
    tree = tmp_path / "repo"
    (tree / "papers").mkdir(parents=True)
    (tree / "papers" / "one.pdf").write_bytes(b"%PDF one")
    (tree / "papers" / "two.pdf").write_bytes(b"%PDF two")
    (tree / "papers" / "dc.xml").write_text("<oai_dc:dc/>")
    return tree


@pytest.fixture
def config(import_settings) -> dict:
    return import_settings


def write(tree: Path, rows: str, name: str = "items.csv") -> Path:
    path = tree / name
    path.write_text(HEADER + rows)
    return path


def run(config, path: Path, **kwargs):
    records, problems = manifest.scan(path)
    return apply(config, manifest.source_name(path), records, problems=problems, **kwargs)


def held(config) -> dict[str, index.Item]:
    catalog = index.scan(Path(config["collection"]))
    return dict(catalog.by_directory)


ROWS = (
    "p1,papers/one.pdf,,Paper one,en,2020-05-01,,,\n"
    "p1pt,,https://repo.example.org/handle/1/2,Artigo um,pt,,,p1,\n"
    "p2,papers/two.pdf,,Paper two,en,2021,p1,,\n"
    "m2,papers/dc.xml,,,,,,,p2\n"
)


def test_rows_become_items_with_their_relations(config, tree):
    path = write(tree, ROWS)
    summary = run(config, path)
    # Three relations, each written once: p1's nextedition, p2's metadata, p1pt's translations
    # (the translation was left out of the count: issue 34).
    assert (summary.minted, summary.linked) == (4, 3)
    items = {i.name.text: i for i in held(config).values()}
    p1, p1pt, p2, m2 = (items[summary.ibis[k]] for k in ("p1", "p1pt", "p2", "m2"))
    assert p1.nextedition.text == p2.name.text
    assert p2.metadata.text == m2.name.text and m2.contenttype == "Metadata"
    assert p1pt.translations["en"].text == p1.name.text
    assert p1pt.location == "https://repo.example.org/handle/1/2"
    assert p1.dc["title"] == ["Paper one"] and p1.dc["date"] == ["2020-05-01"]
    assert not (Path(config["collection"]) / p1pt.directory / "doc").exists()
    # The answers: the translation's url is the repository's landing page.
    app = webtest.TestApp(create_app(config))
    got = pairs_of(url_request(app, p1.name.text, verbs="GetTranslation(pt)"))
    assert got["url.translation(pt)"] == "https://repo.example.org/handle/1/2"
    got = pairs_of(url_request(app, p1.name.text, verbs="GetLastEdition"))
    assert p2.name.text in got["ibi.lastedition"]


def test_a_rerun_mints_nothing_and_changes_nothing(config, tree):
    path = write(tree, ROWS)
    first = run(config, path)
    before = sorted(str(p) for p in Path(config["collection"]).rglob("*"))
    again = run(config, path)
    assert (again.minted, again.updated, again.linked, again.deleted) == (0, 0, 0, 0)
    assert again.unchanged == 4 and again.ibis == first.ibis
    assert sorted(str(p) for p in Path(config["collection"]).rglob("*")) == before


def test_what_changed_is_revised_in_place(config, tree):
    path = write(tree, ROWS)
    first = run(config, path)
    (tree / "papers" / "one.pdf").write_bytes(b"%PDF one, corrected")
    write(tree, ROWS.replace("https://repo.example.org/handle/1/2", "https://repo.example.org/x"))
    summary = run(config, path)
    assert (summary.minted, summary.updated) == (0, 2)
    items = {i.name.text: i for i in held(config).values()}
    p1 = items[first.ibis["p1"]]
    assert items[first.ibis["p1pt"]].location == "https://repo.example.org/x"
    directory = Path(config["collection"]) / p1.directory
    assert (directory / "doc" / "one.pdf").read_bytes() == b"%PDF one, corrected"
    kept = [p for p in directory.iterdir() if p.name.startswith(".replaced-doc-")]
    assert len(kept) == 1 and (kept[0] / "one.pdf").read_bytes() == b"%PDF one"
    assert p1.nextedition is not None  # what another row set on it stays


def test_a_row_gone_becomes_a_tombstone(config, tree):
    path = write(tree, ROWS)
    first = run(config, path)
    write(tree, ROWS.replace("p1pt,,https://repo.example.org/handle/1/2,Artigo um,pt,,,p1,\n", ""))
    summary = run(config, path)
    assert summary.deleted == 1
    app = webtest.TestApp(create_app(config))
    assert pairs_of(url_request(app, first.ibis["p1pt"]))["state"] == "Deleted"
    assert run(config, path).deleted == 0  # once


def test_an_incremental_run_deletes_only_what_it_says(config, tree):
    path = write(tree, ROWS)
    first = run(config, path)
    source = manifest.source_name(path)
    summary = apply(config, source, [Record("p2", deleted=True, where="feed")], complete=False)
    assert summary.deleted == 1 and summary.unchanged == 0
    items = {i.name.text: i for i in held(config).values()}
    assert items[first.ibis["p2"]].state == "Deleted"
    assert items[first.ibis["p1"]].state == "Original"


def test_relations_reach_rows_of_an_earlier_run(config, tree):
    path = write(tree, "p1,papers/one.pdf,,Paper one,en,,,,\n")
    first = run(config, path)
    source = manifest.source_name(path)
    later = apply(
        config,
        source,
        [Record("p2", files=(tree / "papers" / "two.pdf",), relations={"edition_of": "p1"})],
        complete=False,
    )
    items = {i.name.text: i for i in held(config).values()}
    assert items[first.ibis["p1"]].nextedition.text == later.ibis["p2"]


def test_a_dry_run_says_what_it_would_do_and_writes_nothing(config, tree, tmp_path):
    path = write(tree, ROWS)
    summary = run(config, path, dry_run=True)
    assert summary.minted == 4 and summary.linked == 3
    assert any(line.startswith("mint p1 ") for line in summary.actions)
    assert not any(Path(config["collection"]).iterdir())
    mapping = Path(config["state_dir"]) / MAPPING_FILE
    if mapping.exists():
        assert not sqlite3.connect(mapping).execute("SELECT * FROM import_map").fetchall()
    assert run(config, path).minted == 4  # and the real run does it


def test_a_row_whose_item_never_appeared_is_minted_again(config, tree):
    # A crash between recording the mapping and renaming the item into place leaves a row
    # naming an IBI no directory holds: the next run mints that row (once).
    path = write(tree, "p1,papers/one.pdf,,Paper one,en,,,,\n")
    first = run(config, path)
    directory = Path(config["collection"]) / first.ibis["p1"]
    directory.rename(directory.with_name("elsewhere"))
    again = run(config, path)
    assert again.minted == 1 and again.ibis["p1"] != first.ibis["p1"]
    assert run(config, path).minted == 0


def refused(config, path) -> list[str]:
    with pytest.raises(ImportRefused) as caught:
        run(config, path)
    assert not any(Path(config["collection"]).iterdir()), "something was applied"
    return caught.value.problems


def test_duplicate_ids_are_refused_naming_both_lines(config, tree):
    path = write(tree, "p1,papers/one.pdf,,,,,,,\np1,papers/two.pdf,,,,,,,\n")
    assert refused(config, path) == [f"{path}:3: id 'p1' again (first at {path}:2)"]


def test_an_edition_cycle_is_refused(config, tree):
    path = write(
        tree,
        "a,papers/one.pdf,,,,,c,,\nb,papers/two.pdf,,,,,a,,\nc,papers/dc.xml,,,,,b,,\n",
    )
    (problem,) = refused(config, path)
    assert "edition_of makes a cycle" in problem and f"{path}:" in problem


def test_two_next_editions_of_one_row_are_refused(config, tree):
    path = write(
        tree, "a,papers/one.pdf,,,,,,,\nb,papers/two.pdf,,,,,a,,\nc,papers/dc.xml,,,,,a,,\n"
    )
    (problem,) = refused(config, path)
    assert problem.startswith(f"{path}:4: edition_of 'a': {path}:3 is its next edition")


def test_relations_to_unknown_ids_and_to_itself_are_refused(config, tree):
    path = write(tree, "a,papers/one.pdf,,,,,zz,,\nb,papers/two.pdf,,,,,,,b\n")
    assert refused(config, path) == [
        f"{path}:2: edition_of 'zz': no record has this id",
        f"{path}:3: metadata_of names the record itself",
    ]


def test_a_translation_needs_both_languages(config, tree):
    path = write(tree, "a,papers/one.pdf,,,,,,,\nb,papers/two.pdf,,,en,,,a,\n")
    (problem,) = refused(config, path)
    assert problem.startswith(f"{path}:3: translation_of 'a': that record has no language")


def test_every_bad_row_is_one_line_and_nothing_is_applied(config, tree):
    path = write(
        tree,
        "ok,papers/one.pdf,,,,,,,\n"
        "nofile,,,,,,,,\n"
        "badurl,,ftp://x.example.org/,,,,,,\n"
        "badlang,papers/two.pdf,,,english,,,,\n"
        "baddate,papers/two.pdf,,,,last year,,,\n",
    )
    problems = refused(config, path)
    assert [p.split(": ", 1)[0] for p in problems] == [
        f"{path}:3",
        f"{path}:4",
        f"{path}:5",
        f"{path}:6",
    ]


def test_a_directory_swapped_for_a_link_after_the_check_carries_nothing_out(config, tree, tmp_path):
    # The files are checked when the manifest is read, and copied later (hours later in a
    # large import): a depositor who can still write the tree swaps papers/ for a link to
    # elsewhere. The copy followed it, and the secret beside the tree became public.
    path = write(tree, "p1,papers/one.pdf,,,,,,,\n")
    records, problems = manifest.scan(path)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "one.pdf").write_text("not for the public")
    (tree / "papers").rename(tree / "papers.checked")
    (tree / "papers").symlink_to(outside)
    with pytest.raises(Exception, match="symbolic link"):
        apply(config, manifest.source_name(path), records, problems=problems)
    copied = [p.read_bytes() for p in Path(config["collection"]).rglob("one.pdf")]
    assert b"not for the public" not in copied


def test_file_names_one_doc_cannot_hold_apart_or_serve_are_refused(config, tree):
    # Paper.pdf and paper.pdf, café in two Unicode forms: one file on a case-insensitive or
    # normalizing disk, the other silently replaced; a name with a newline is never served.
    (tree / "other").mkdir()
    for name in ("Paper.pdf", "caf\u00e9.pdf", "new\nline.pdf", "back\\slash.pdf"):
        (tree / "papers" / name).write_bytes(b"1")
    for name in ("paper.pdf", "cafe\u0301.pdf"):
        (tree / "other" / name).write_bytes(b"2")
    path = write(
        tree,
        "a,papers/Paper.pdf;other/paper.pdf,,,,,,,\n"
        "b,papers/caf\u00e9.pdf;other/cafe\u0301.pdf,,,,,,,\n"
        '"c","papers/new\nline.pdf",,,,,,,\n'
        "d,papers/back\\slash.pdf,,,,,,,\n",
    )
    problems = refused(config, path)
    assert [p.split(": ", 1)[1] for p in problems] == [
        "two file names differ only in case or Unicode form; doc/ holds one file per name",
        "two file names differ only in case or Unicode form; doc/ holds one file per name",
        "file name 'new\\nline.pdf' holds a control character or a backslash",
        "file name 'back\\\\slash.pdf' holds a control character or a backslash",
    ]


def test_a_record_too_large_for_its_sidecar_is_refused_before_anything(config, tree):
    # 40,000 characters pass the manifest's cell bound but take 80 KB in item.yaml, past the
    # sidecar's 64 KiB: the item was written, refused by the index (never served), and every
    # re-run stopped on it ("larger than 65536 bytes ...; fix it first").
    path = write(tree, f"ok,papers/one.pdf,,Paper,,,,,\nbig,papers/two.pdf,,{'é' * 40_000},,,,,\n")
    (problem,) = refused(config, path)
    assert problem.startswith(f"{path}:3: its title, Dublin Core and location take 80")


def test_a_deposit_or_revision_past_the_sidecar_bound_writes_nothing(config, tree):
    from archive_service import deposit as depositmod
    from archive_service.collection.sidecar import SidecarError

    with pytest.raises(depositmod.DepositError, match="larger than 65536 bytes"):
        depositmod.deposit(config, [tree / "papers" / "one.pdf"], title="é" * 40_000)
    assert not any(Path(config["collection"]).iterdir())
    made = depositmod.deposit(config, [tree / "papers" / "one.pdf"], title="Small")
    sidecar = made.directory / "item.yaml"
    before = sidecar.read_bytes()
    with pytest.raises(SidecarError, match="larger than 65536 bytes"):
        depositmod.revise(config, made.primary, changes={"dc": {"title": "é" * 40_000}})
    assert sidecar.read_bytes() == before


@pytest.mark.process
def test_with_a_shared_database_every_node_knows_what_was_imported(
    config, tree, tmp_path, database_url
):
    # Two nodes of one Archive: one collection, state directories of their own, the mapping
    # in PostgreSQL. What one node imported, the other does not mint again.
    path = write(tree, ROWS)
    first = run({**config, "database": database_url, "state_dir": str(tmp_path / "a")}, path)
    assert first.minted == 4
    assert not (tmp_path / "a" / MAPPING_FILE).exists()
    again = run({**config, "database": database_url, "state_dir": str(tmp_path / "b")}, path)
    assert again.minted == 0 and again.unchanged == 4 and again.ibis == first.ibis


def test_two_nodes_importing_one_source_at_once_mint_each_record_once(
    config, tree, tmp_path, database_url, caplog
):
    """Another node's import of the same source holds the source's lock in the shared
    database: this node's import waits for it, says so, then finds what it mapped. (Each node
    had only a lock file of its own state directory: both minted the unmapped records.)"""
    path = write(tree, ROWS)
    source = manifest.source_name(path)
    other = postgres.session(database_url, "the other node")
    other.execute("SELECT pg_advisory_lock(%s)", (postgres.advisory_key(f"import {source}"),))
    done: list = []
    node = {**config, "database": database_url, "state_dir": str(tmp_path / "a")}
    importing = threading.Thread(target=lambda: done.append(run(node, path)))
    try:
        with caplog.at_level(logging.WARNING, logger="archive_service.imports.apply"):
            importing.start()
            importing.join(1.5)
            assert importing.is_alive() and not done  # waits: mints nothing meanwhile
            assert not held(config)
            assert f"waiting for another node's import of {source}" in caplog.text
    finally:
        other.close()  # the other node's import ends (or dies): the lock goes with it
    importing.join(30)
    assert done and done[0].minted == 4
    again = run({**config, "database": database_url, "state_dir": str(tmp_path / "b")}, path)
    assert again.minted == 0 and again.ibis == done[0].ibis


def test_a_relation_no_row_says_any_longer_is_taken_out(config, tree):
    path = write(tree, ROWS)
    first = run(config, path)
    write(
        tree, ROWS.replace("p2,papers/two.pdf,,Paper two,en,2021,p1,,", "p2,papers/two.pdf,,,,,,,")
    )
    summary = run(config, path)
    items = {i.name.text: i for i in held(config).values()}
    assert items[first.ibis["p1"]].nextedition is None
    assert items[first.ibis["p2"]].metadata is not None  # m2 still says so
    assert any("took nextedition" in action for action in summary.actions)
    assert run(config, path, dry_run=True).actions == []  # nothing left to do


def test_an_item_deleted_by_hand_is_left_deleted(config, tree):
    from archive_service import deposit

    path = write(tree, ROWS)
    first = run(config, path)
    deposit.delete(config, first.ibis["p1"])
    write(tree, ROWS.replace("Paper one", "Paper one revised"))
    summary = run(config, path)
    assert summary.minted == 0
    assert any("is Deleted (by hand?)" in note for note in summary.notes)
    items = {i.name.text: i for i in held(config).values()}
    assert items[first.ibis["p1"]].state == "Deleted"


def test_a_relation_to_a_row_removed_in_the_same_run_is_refused(config, tree):
    path = write(tree, "a,papers/one.pdf,,,,,,,\nb,papers/two.pdf,,,,,,,\n")
    run(config, path)
    write(tree, "b,papers/two.pdf,,,,,a,,\n")  # a is gone: it would become a tombstone
    with pytest.raises(ImportRefused) as caught:
        run(config, path)
    assert caught.value.problems == [f"{path}:2: edition_of 'a': no record has this id"]


@pytest.mark.parametrize("dry_run", [True, False], ids=["dry run", "run"])
def test_an_archive_that_cannot_mint_is_refused_before_anything(config, tree, dry_run):
    """No archiveaddress nor archiveip: the dry run said "4 would be minted" and the run then
    stopped at its first record; both now refuse at once, saying what is missing."""
    unable = {k: v for k, v in config.items() if k not in ("archiveaddress", "archiveip")}
    with pytest.raises(ImportRefused) as refused:
        run(unable, write(tree, ROWS), dry_run=dry_run)
    assert "no IBI can be minted" in str(refused.value)
    assert "archiveaddress" in str(refused.value) and "archiveip" in str(refused.value)
    assert not any(Path(config["collection"]).iterdir())


def test_streamed_records_are_applied_a_batch_at_a_time(config) -> None:
    """A harvest's records (`batch`): read as they come, each batch checked then applied; a
    record listed again in a later batch is the same item (its mapping read per batch), one
    listed twice in a batch is applied as listed last; a bad batch is refused alone, those
    before it kept."""

    def records(count: int, last_title: str = "again"):
        for n in range(count):
            yield Record(f"r{n}", location=f"https://repo.example.org/{n}", title=f"t{n}")
        yield Record("r0", location="https://repo.example.org/0", title="moved")
        yield Record("r0", location="https://repo.example.org/0", title=last_title)

    stream = records(7)
    first = apply(config, "oai-pmh:x", stream, complete=False, batch=3, keep_actions=False)
    assert first.minted == 7 and first.updated == 1  # r0 revised in the last batch
    assert first.ibis == {} and first.actions == []  # nothing kept per record
    sidecars = list(Path(config["collection"]).rglob("item.yaml"))
    assert len(sidecars) == 7
    assert sum("title: again" in p.read_text() for p in sidecars) == 1

    def bad():
        yield from (Record(f"r{n}", location=f"https://repo.example.org/{n}") for n in range(3))
        yield Record("r9", location="gopher://x.example.org/")

    with pytest.raises(ImportRefused) as refused:
        apply(config, "oai-pmh:x", bad(), complete=False, batch=3)
    assert refused.value.applied == 3
    assert refused.value.problems[0].startswith("record 'r9': location:")


def test_a_changed_translation_counts_once_and_other_changes_not_at_all(config, tree):
    path = write(tree, ROWS)
    first = run(config, path)
    # p1pt's title changes, its translation does not: an update, no relation set.
    write(tree, ROWS.replace("Artigo um", "Artigo 1"))
    summary = run(config, path)
    assert (summary.updated, summary.linked) == (1, 0)
    # p1pt now translates p2 instead of p1: one relation set, on p1pt.
    write(tree, ROWS.replace("Artigo um,pt,,,p1,", "Artigo um,pt,,,p2,"))
    summary = run(config, path, dry_run=True)
    assert summary.linked == 1
    assert f"would set translations en {first.ibis['p2']} on {first.ibis['p1pt']}" in (
        summary.actions
    )
    summary = run(config, path)
    assert (summary.updated, summary.linked) == (1, 1)
    items = {i.name.text: i for i in held(config).values()}
    assert items[first.ibis["p1pt"]].translations["en"].text == first.ibis["p2"]
