"""One claim rule (issue 17): of the directories claiming one IBI, the in-memory catalog
(`scan`, for check, deposit and the last-resort server) and the index's catalog (what workers
serve from) serve the same one, and report the same others, in the tie cases too: a
repository-name directory against an IBIp directory whichever comes first, two of a kind, and
a chain where the IBIp directory that won one IBI loses another to a repository-name
directory, so that a third directory it had beaten is served after all."""

from __future__ import annotations

from pathlib import Path

import pytest

from archive_service import deposit
from archive_service.collection import items as index
from archive_service.index import catalog as catalogmod
from archive_service.index import store

REP_A = "sid.inpe.br/col-a/2001/01.01.00.00"
REP_B = "sid.inpe.br/col-b/2002/02.02.00.00"
REP_Z = "zzz.example.org/col/2003/03.03.00.00"
IBIP_A = "8JMKD3MGP8W/AAAAAAA"
IBIP_D = "8JMKD3MGP8W/DDDDDDD"


def item(root: Path, directory: str, sidecar: str = "") -> None:
    path = root / directory
    (path / "doc").mkdir(parents=True)
    (path / "doc" / "x.txt").write_text(directory)
    if sidecar:
        (path / "item.yaml").write_text(sidecar)


# Each case: the items (directory, sidecar), then for each IBI asked, the directory served.
CASES = {
    "rep directory after the IBIp directory it shares an IBI with": (
        [(IBIP_A, f"rep: {REP_Z}\n"), (REP_Z, "")],
        {REP_Z: REP_Z, IBIP_A: None},  # an item that loses one of its IBIs is not served
    ),
    "rep directory before the IBIp directory": (
        [(IBIP_A, f"rep: {REP_A}\n"), (REP_A, f"ibip: {IBIP_A}\n")],
        {REP_A: REP_A, IBIP_A: REP_A},
    ),
    "two rep directories naming one IBIp: the first": (
        [(REP_A, f"ibip: {IBIP_A}\n"), (REP_B, f"ibip: {IBIP_A}\n")],
        {IBIP_A: REP_A, REP_A: REP_A, REP_B: None},
    ),
    "two IBIp directories naming one rep: the first": (
        [(IBIP_A, f"rep: {REP_Z}\n"), (IBIP_D, f"rep: {REP_Z}\n")],
        {REP_Z: IBIP_A, IBIP_A: IBIP_A, IBIP_D: None},
    ),
    # IBIP_A beats IBIP_D on REP_Z (first IBIp directory), but loses its own IBIp to the rep
    # directory REP_B: with IBIP_A not served, nothing served claims REP_Z before IBIP_D.
    "an IBIp directory beaten by one that a rep directory beats": (
        [
            (IBIP_A, f"rep: {REP_Z}\n"),
            (IBIP_D, f"rep: {REP_Z}\n"),
            (REP_B, f"ibip: {IBIP_A}\n"),
        ],
        {REP_Z: IBIP_D, IBIP_A: REP_B, IBIP_D: IBIP_D, REP_B: REP_B},
    ),
}


@pytest.mark.parametrize("case", CASES, ids=list(CASES))
def test_both_catalogs_serve_the_same_claimant(tmp_path: Path, case: str):
    items, expected = CASES[case]
    root = tmp_path / "col"
    for directory, sidecar in items:
        item(root, directory, sidecar)
    memory = index.scan(root)
    st = store.Store(root, tmp_path / "state")
    store.Writer(st).refresh()
    indexed = catalogmod.StoreCatalog(st)
    try:
        for ibi, directory in expected.items():
            for catalog, label in ((memory, "scan"), (indexed, "index")):
                found = catalog.lookup(ibi)
                assert (found.directory if found else None) == directory, (label, ibi)
        assert indexed.count() == len(memory.by_directory)
        claims = sorted(str(p) for p in memory.problems if "also claimed" in p.message)
        assert claims == sorted(str(p) for p in indexed.problems if "also claimed" in p.message)
        assert claims  # every case has a shared IBI to report
    finally:
        indexed.close()


@pytest.mark.parametrize("indexed", [True, False], ids=["with the index", "without"])
def test_a_deposit_links_the_item_both_catalogs_serve(tmp_path: Path, indexed: bool):
    """`deposit --nextedition-of` writes into the sidecar of the item served for that IBI (the
    third place that chose a claimant), with or without an index to find it by."""
    items, expected = CASES["an IBIp directory beaten by one that a rep directory beats"]
    root = tmp_path / "col"
    for directory, sidecar in items:
        item(root, directory, sidecar)
    state = tmp_path / "state"
    if indexed:
        store.Writer(store.Store(root, state)).refresh()
    upload = tmp_path / "report.txt"
    upload.write_text("a report\n")
    config = {
        "collection": str(root),
        "state_dir": str(state),
        "archiveaddress": "archive.example.org:80",
        "archiveip": "150.163.2.174",
    }
    done = deposit.deposit(config, [upload], nextedition_of=REP_Z)
    linked = [d for d, _ in items if "nextedition" in (root / d / "item.yaml").read_text()]
    assert linked == [expected[REP_Z]]
    assert index.scan(root).lookup(REP_Z).nextedition.key == done.primary.lower()
