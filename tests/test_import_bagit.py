"""BagIt bags (imports/bags.py, issue 21), real ones made with `bagit.make_bag`: the payload
becomes doc/, bag-info.txt inline Dublin Core; an invalid bag is refused saying why, and so
is a payload that would carry a file from outside the bag (a symbolic link) or one the bag
does not hold (fetch.txt)."""

from __future__ import annotations

import os
from pathlib import Path

import bagit
import pytest
import webtest

from archive_service.collection import items as index
from archive_service.imports import bags
from archive_service.imports.apply import ImportRefused, apply
from archive_service.web import create_app
from serve_process import run_command
from support import pairs_of, url_request


def make(tmp_path: Path, name: str, files: dict[str, bytes], info: dict | None = None) -> Path:
    bag = tmp_path / "bags" / name
    for rel, content in files.items():
        (bag / rel).parent.mkdir(parents=True, exist_ok=True)
        (bag / rel).write_bytes(content)
    bagit.make_bag(str(bag), info or {})
    return bag


@pytest.fixture
def config(import_settings) -> dict:
    return import_settings


def refusal(*directories: Path) -> str:
    with pytest.raises(ImportRefused) as caught:
        bags.read(directories)
    (problem,) = caught.value.problems
    return problem


def test_a_bag_becomes_an_item(config, tmp_path):
    bag = make(
        tmp_path,
        "thesis-17",
        {"thesis.pdf": b"%PDF thesis", "data/table.csv": b"a,b\n"},
        {
            "Title": "A thesis",
            "External-Description": "On bags",
            "Source-Organization": "INPE",
            "DC-Creator": ["Ana", "Rui"],
            "Language": "pt-BR",
        },
    )
    (record,) = bags.read([bag])
    assert record.source_id == "thesis-17" and record.where == f"bag {bag}"
    summary = apply(config, bags.SOURCE, [record], complete=False)
    item = index.scan(Path(config["collection"])).lookup(summary.ibis["thesis-17"])
    doc = Path(config["collection"]) / item.directory / "doc"
    assert sorted(p.name for p in doc.iterdir()) == ["table.csv", "thesis.pdf"]
    assert (doc / "thesis.pdf").read_bytes() == b"%PDF thesis"
    assert item.language == "pt-BR"
    assert item.dc["title"] == ["A thesis"] and item.dc["creator"] == ["Ana", "Rui"]
    assert item.dc["publisher"] == ["INPE"] and item.dc["description"] == ["On bags"]
    got = pairs_of(url_request(webtest.TestApp(create_app(config)), item.name.text))
    assert (
        got["state"] == "Original" and "/item/" in got["url"]
    )  # two files, no index: its landing page
    again = apply(config, bags.SOURCE, bags.read([bag]), complete=False)
    assert again.minted == 0 and again.unchanged == 1


def test_bags_name_each_other(config, tmp_path):
    first = make(tmp_path, "v1", {"a.pdf": b"1"})
    second = make(tmp_path, "v2", {"a.pdf": b"2"}, {"Edition-Of": "v1"})
    summary = apply(config, bags.SOURCE, bags.read([first, second]), complete=False)
    item = index.scan(Path(config["collection"])).lookup(summary.ibis["v1"])
    assert item.nextedition.text == summary.ibis["v2"]


def test_a_tampered_bag_is_refused_with_why(tmp_path):
    bag = make(tmp_path, "b", {"a.pdf": b"original"})
    (bag / "data" / "a.pdf").write_bytes(b"changed!")  # same size, other bytes
    problem = refusal(bag)
    assert problem.startswith(f"bag {bag}: invalid: ")
    assert problem.endswith(": data/a.pdf differs from its manifest's checksum")


def test_a_bag_missing_a_file_is_refused(tmp_path):
    bag = make(tmp_path, "b", {"a.pdf": b"a", "b.pdf": b"b"})
    (bag / "data" / "b.pdf").unlink()
    assert refusal(bag).endswith(": data/b.pdf is missing")


def test_a_directory_that_is_no_bag_is_refused(tmp_path):
    plain = tmp_path / "plain"
    (plain / "data").mkdir(parents=True)
    (plain / "data" / "a.pdf").write_bytes(b"a")
    assert refusal(plain).startswith(f"bag {plain}: not a valid bag: ")
    assert refusal(tmp_path / "nowhere") == f"bag {tmp_path / 'nowhere'}: not a directory"


def test_a_payload_link_out_of_the_bag_is_refused(tmp_path):
    # A link in the payload would carry whatever it reaches (here a secret beside the bag)
    # into a public collection; the payload is looked at before bagit reads any file.
    secret = tmp_path / "secret.txt"
    secret.write_text("not for the public")
    bag = make(tmp_path, "linked", {"a.pdf": b"a"})
    os.symlink(secret, bag / "data" / "notes.txt")
    assert refusal(bag) == (
        f"bag {bag}: data/notes.txt is a symbolic link (to {secret}); a bag must hold its files"
    )
    os.unlink(bag / "data" / "notes.txt")
    os.symlink(tmp_path, bag / "data" / "more")  # a linked directory too
    assert "data/more is a symbolic link" in refusal(bag)


def test_a_tag_file_link_or_fifo_is_refused_before_bagit_reads_it(tmp_path):
    # bag-info.txt linked to a file outside the bag (no tagmanifest, which BagIt allows):
    # its "Title: ..." lines became the public dc; a FIFO there hung the import for good.
    import threading

    secret = tmp_path / "secret.txt"
    secret.write_text("Title: not for the public\n")
    bag = make(tmp_path, "tagged", {"a.pdf": b"a"})
    for tagmanifest in bag.glob("tagmanifest-*.txt"):
        tagmanifest.unlink()
    (bag / "bag-info.txt").unlink()
    os.symlink(secret, bag / "bag-info.txt")
    assert refusal(bag) == (
        f"bag {bag}: bag-info.txt is a symbolic link (to {secret}); a bag must hold its files"
    )
    (bag / "bag-info.txt").unlink()
    os.mkfifo(bag / "bag-info.txt")
    found: list[str] = []
    reader = threading.Thread(target=lambda: found.append(refusal(bag)), daemon=True)
    reader.start()
    reader.join(10)
    if reader.is_alive():  # let the blocked open go before failing
        os.close(os.open(bag / "bag-info.txt", os.O_WRONLY | os.O_NONBLOCK))
    assert found == [f"bag {bag}: bag-info.txt is not a regular file"]


def test_a_payload_folder_swapped_for_a_link_after_validation_carries_nothing_out(config, tmp_path):
    # Validated, then data/sub swapped for a link to elsewhere before the copy (a depositor
    # who can still write the bag): the copy followed it into a public collection.
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "a.pdf").write_text("not for the public")
    bag = make(tmp_path, "swapped", {"sub/a.pdf": b"a"})
    records = bags.read([bag])
    (bag / "data" / "sub").rename(bag / "data" / "sub.checked")
    (bag / "data" / "sub").symlink_to(outside)
    with pytest.raises(Exception, match="symbolic link"):
        apply(config, bags.SOURCE, records, complete=False)
    copied = [p.read_bytes() for p in Path(config["collection"]).rglob("a.pdf")]
    assert b"not for the public" not in copied


def test_a_holey_bag_is_refused(tmp_path):
    bag = make(tmp_path, "holey", {"a.pdf": b"a"})
    (bag / "fetch.txt").write_text("https://example.org/b.pdf 1 data/b.pdf\n")
    assert "fetch.txt" in refusal(bag)


def test_two_payload_files_of_one_name_are_refused(tmp_path):
    bag = make(tmp_path, "clash", {"x/a.pdf": b"1", "y/a.pdf": b"2"})
    assert "have one name" in refusal(bag)


@pytest.mark.process
def test_the_command_imports_bags_and_refuses_a_bad_one(config, tmp_path):
    good = make(tmp_path, "good", {"a.pdf": b"a"}, {"Title": "Good"})
    bad = make(tmp_path, "bad", {"a.pdf": b"a"})
    (bad / "data" / "a.pdf").write_bytes(b"b")
    common = ["--collection", config["collection"], "--state-dir", config["state_dir"]]
    common += ["--archiveaddress", "archive.example.org"]
    done = run_command(["import", "bagit", str(good), str(bad), *common])
    assert done.returncode == 1
    assert done.stderr.splitlines()[0].startswith(f"bag {bad}: invalid: ")
    assert not any(Path(config["collection"]).iterdir())
    done = run_command(["import", "bagit", str(good), *common])
    assert done.returncode == 0 and done.stdout.startswith("1 minted"), done.stderr


def test_bag_info_too_large_for_a_sidecar_is_refused_before_anything(config, tmp_path):
    # bag-info.txt has no bound of its own; its Dublin Core goes into item.yaml, which the
    # index refuses past 64 KiB: the item was minted, then never served.
    bag = make(tmp_path, "wordy", {"a.pdf": b"a"}, {"External-Description": ["d" * 40_000] * 2})
    with pytest.raises(ImportRefused) as caught:
        apply(config, bags.SOURCE, bags.read([bag]), complete=False)
    (problem,) = caught.value.problems
    assert problem.startswith(f"bag {bag}: its title, Dublin Core and location take 80")
    assert not any(Path(config["collection"]).iterdir())


def test_a_bag_info_larger_than_any_item_needs_is_refused_before_bagit_reads_it(tmp_path):
    """bagit reads bag-info.txt whole into lists: 25 MB of labels took the import to 208 MB
    and 10 s before the bag was refused for its Dublin Core (or not: unknown labels are
    dropped); past MAX_BAG_INFO it is refused unread."""
    bag = make(tmp_path, "huge", {"a.pdf": b"a"})
    with open(bag / "bag-info.txt", "a") as info:
        info.write("X-Label: v\n" * (bags.MAX_BAG_INFO // 11 + 1))
    assert refusal(bag).endswith(f"bag-info.txt is larger than {bags.MAX_BAG_INFO} bytes")


def test_a_manifest_listing_more_than_the_bag_holds_is_refused_before_bagit_reads_it(tmp_path):
    """bagit reads each manifest whole into a dict: a 118 MB manifest listing a million files
    a one-file bag lacks took the import to 960 MB and 116 s; one listing more lines than
    the bag has files, or longer than their lines can be, is refused unread."""
    digest = "0" * 64
    many = make(tmp_path, "many", {"a.pdf": b"a"})
    with open(many / "manifest-sha256.txt", "a") as manifest:
        manifest.write("".join(f"{digest}  data/{i}.pdf\n" for i in range(20)))
    assert refusal(many).endswith("manifest-sha256.txt lists more than the bag's 7 files")
    large = make(tmp_path, "large", {"a.pdf": b"a"})
    with open(large / "tagmanifest-sha256.txt", "a") as manifest:
        manifest.write(f"{digest}  {'x' * 40_000}\n")
    assert refusal(large).endswith(
        "tagmanifest-sha256.txt is larger than a manifest of the bag's 7 files"
    )


def test_the_bag_s_own_date_and_sender_are_not_the_work_s(config, tmp_path):
    # Issue 34: make_bag writes Bagging-Date (today), which became the item's first dc:date,
    # read by citations as the work's date; Contact-Name (who sent the bag) became a
    # dc:contributor of the work.
    bag = make(
        tmp_path,
        "dated",
        {"a.pdf": b"a"},
        {"Date": "1999", "Contact-Name": "Clerk", "Contact-Email": "c@example.org"},
    )
    (record,) = bags.read([bag])
    assert "Bagging-Date" in bagit.Bag(str(bag)).info
    assert record.dc["date"] == ("1999",) and "contributor" not in record.dc
    undated = make(tmp_path, "undated", {"a.pdf": b"a"}, {"Title": "T"})
    summary = apply(config, bags.SOURCE, bags.read([undated]), complete=False)
    item = index.scan(Path(config["collection"])).lookup(summary.ibis["undated"])
    assert "date" not in item.dc and item.dc["title"] == ["T"]


def readme_table() -> dict[str, str | None]:
    """README's bag-info table: label (lower case) -> the first `code` of its row's second
    cell, or None for "not kept"."""
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    lines = readme.split("<!-- bag-info table", 1)[1].splitlines()[1:]
    table: dict[str, str | None] = {}
    for line in (line.strip() for line in lines[2:]):  # past the header and its rule
        if not line.startswith("|"):
            break
        labels, becomes = (cell.strip() for cell in line.strip("|").split("|", 1))
        target = None if becomes.startswith("not kept") else becomes.split("`")[1]
        for label in labels.split("`")[1::2]:
            assert label.lower() not in table, f"README lists {label} twice"
            table[label.lower()] = target
    return table


def test_readme_documents_bag_info_as_the_mapping_does(tmp_path):
    # The one table (bags.BAG_INFO) and README's must say the same; and what the table says
    # is what a bag's labels become.
    assert readme_table() == bags.BAG_INFO
    info = {label.title(): f"v-{label}" for label in bags.BAG_INFO if label != "payload-oxum"}
    for label in ("Edition-Of", "Translation-Of", "Metadata-Of"):
        del info[label]
    bag = make(tmp_path, "every", {"a.pdf": b"a"}, info)
    (record,) = bags.read([bag])
    wanted: dict[str, tuple[str, ...]] = {}
    for label, target in bags.BAG_INFO.items():
        if target and target.startswith("dc:") and label.title() in info:
            element = target.removeprefix("dc:")
            wanted[element] = (*wanted.get(element, ()), f"v-{label}")
    assert {k: tuple(sorted(v)) for k, v in record.dc.items()} == {
        k: tuple(sorted(v)) for k, v in wanted.items()
    }
