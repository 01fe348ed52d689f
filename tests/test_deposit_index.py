"""`deposit` and `delete` read the persistent index, not the whole collection (issue 17): a
deposit opens the sidecars of the items it concerns only, finds an item the previous deposit
made even while the index cannot be written, and works beside a running `serve`."""

from __future__ import annotations

import shutil
import sys
import urllib.request
from pathlib import Path
from urllib.parse import urlencode

import pytest

from archive_service import cli, deposit
from archive_service.collection import items as index
from archive_service.index.store import Store
from archive_service.protocol import pairs
from archive_service.testing import make_collection, wait_until
from serve_process import Serve
from support import ADDRESS, SAMPLE

IP = "150.163.2.174"
BANON = "iconet.com.br/banon/2009/09.09.22.01"  # pt, ibip LK47B6W/362SFKH

# Every item.yaml this process opens while `_counting` is set (an audit hook cannot be
# removed, so one hook serves every test and counts only when asked).
_opened: list[str] | None = None


def _audit(event: str, args: tuple) -> None:
    if _opened is not None and event == "open" and isinstance(args[0], (str, bytes)):
        if str(args[0] if isinstance(args[0], str) else args[0].decode(errors="replace")).endswith(
            "/item.yaml"
        ):
            _opened.append(args[0])


sys.addaudithook(_audit)


def sidecars_opened(action) -> list[str]:
    global _opened
    _opened = []
    try:
        action()
        return _opened
    finally:
        _opened = None


def run(capsys, *argv) -> tuple[int, str, str]:
    code = cli.main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def deposit_args(collection: Path, state: Path, *extra) -> list:
    return [
        "deposit",
        "--collection",
        collection,
        "--archiveaddress",
        ADDRESS,
        "--archiveip",
        IP,
        "--state-dir",
        state,
        *extra,
    ]


def printed(out: str) -> dict[str, str]:
    return {line.partition(" ")[0]: line.partition(" ")[2] for line in out.splitlines()}


@pytest.fixture
def big(tmp_path: Path) -> Path:
    root = tmp_path / "big"
    shutil.copytree(SAMPLE, root, symlinks=True)
    make_collection(root, 300)
    return root


@pytest.fixture
def upload(tmp_path: Path) -> Path:
    path = tmp_path / "report.txt"
    path.write_text("a report\n")
    return path


def test_a_deposit_opens_only_the_sidecars_it_concerns(capsys, big, tmp_path, upload):
    state = tmp_path / "state"
    code, _, err = run(capsys, *deposit_args(big, state, upload))  # first use builds the index
    assert code == 0, err
    items = len(index.scan(big).by_directory)
    assert items > 300

    results = []
    opened = sidecars_opened(
        lambda: results.append(
            run(capsys, *deposit_args(big, state, "--nextedition-of", BANON, upload))
        )
    )
    code, out, err = results[0]
    assert code == 0, err
    assert f"linked {BANON}: nextedition" in out
    # The related item (read, then rewritten) and the new one, whatever the collection holds.
    assert len(opened) <= 6, (len(opened), items)

    opened = sidecars_opened(
        lambda: results.append(
            run(capsys, "delete", "--collection", big, "--state-dir", state, BANON)
        )
    )
    assert results[-1][0] == 0, results[-1][2]
    assert len(opened) <= 12, (len(opened), items)


def test_a_deposit_finds_the_one_before_it_even_when_the_index_is_busy(
    capsys, collection, tmp_path, upload
):
    """The indexer holds the write lock through a long rescan: the deposit cannot update the
    index, and the next deposit still finds it, by either form of its IBI."""
    state = tmp_path / "state"
    code, out, err = run(capsys, *deposit_args(collection, state, "--language", "en", upload))
    assert code == 0, err
    first = printed(out)
    with Store(collection, state).write_lock():
        code, out, err = run(
            capsys,
            *deposit_args(
                collection, state, "--nextedition-of", first["ibip"], "--language", "en", upload
            ),
        )
        assert code == 0, err
        second = printed(out)
        assert out.count("linked ") == 1 and f"nextedition {second['rep']}" in out
        # Through the chain: the first item's next edition is the second, not held in the index.
        code, _, err = run(
            capsys, *deposit_args(collection, state, "--nextedition-of", first["rep"], upload)
        )
        assert code == 1
        assert f"the last edition held here is {second['rep']}" in err
        code, out, err = run(
            capsys,
            *deposit_args(
                collection, state, "--translation-of", second["ibip"], "--language", "pt-BR", upload
            ),
        )
        assert code == 0, err
        third = printed(out)
        assert f"{third['rep']}: translations en: {second['rep']}" in out
        assert (state / deposit.PENDING_FILE).read_text().splitlines()
        code, _, err = run(
            capsys, "delete", "--collection", collection, "--state-dir", state, second["ibip"]
        )
        assert code == 0, err
        assert f"note: still named by {first['rep']} (nextedition)" in err
        assert f"note: still named by {third['rep']} (translations en)" in err
    # Once the lock is free, the next command puts what was pending into the index.
    code, _, err = run(capsys, *deposit_args(collection, state, upload))
    assert code == 0, err
    assert not (state / deposit.PENDING_FILE).exists()


def test_delete_names_the_same_referrers_as_a_scan_of_the_collection(capsys, big, tmp_path):
    scanned = index.scan(big)

    def expected(label: str) -> list[str]:
        item = scanned.lookup(label)
        found = set()
        for other in scanned.by_directory.values():
            refs = [("nextedition", other.nextedition), ("metadata", other.metadata)]
            refs += [(f"translations {lang}", ref) for lang, ref in other.translations.items()]
            found |= {
                f"{other.directory} ({what})"
                for what, ref in refs
                if ref is not None and other is not item and scanned.lookup(ref) is item
            }
        return sorted(found)

    labels = [
        item.name.text
        for item in scanned.by_directory.values()
        if item.state != "Deleted" and expected(item.name.text)
    ][:40]
    assert len(labels) >= 10
    state = tmp_path / "state"
    for label in labels:
        want = expected(label)
        config = {"collection": str(big), "state_dir": str(state)}
        removed = deposit.delete(config, label)
        assert removed.referenced_by == want, label
        scanned = index.scan(big)  # the next expectations see this deletion too


def test_without_a_usable_index_a_deposit_reads_the_collection_and_says_so(
    capsys, collection, tmp_path, upload, caplog
):
    state = tmp_path / "state"
    store = Store(collection, state)
    with store.write_lock():  # the indexer's first build is running
        code, out, err = run(
            capsys, *deposit_args(collection, state, "--nextedition-of", BANON, upload)
        )
    assert code == 0, err
    assert "reading the whole collection instead" in caplog.text
    assert not store.is_complete()


@pytest.mark.process
def test_a_deposit_while_serve_runs_is_answered_at_once_and_linked_by_the_next(
    capsys, collection, tmp_path, upload
):
    state = tmp_path / "state"
    serve = Serve(
        tmp_path, "--collection", str(collection), "--state-dir", str(state), "--no-announce"
    )
    try:
        serve.wait_answering()

        def answered(label: str, **extra: str) -> dict[str, str]:
            query = urlencode(
                {
                    "servicesubject": "urlRequest",
                    "clientinformation.ipaddress": "127.0.0.1",
                    "parsedibiurl.ibi": label,
                    **extra,
                }
            )
            with urllib.request.urlopen(f"{serve.url}?{query}", timeout=5) as response:
                return dict(pairs.parse(response.read().decode("ascii")))

        code, out, err = run(
            capsys,
            *deposit_args(collection, state, "--language", "en", "--nextedition-of", BANON, upload),
        )
        assert code == 0, err
        first = printed(out)
        assert wait_until(lambda: answered(first["ibip"]).get("ibi"), 1.0)
        assert (
            answered(BANON, **{"parsedibiurl.verblist": "GetLastEdition"})["ibi.nextedition"]
            == f"{{rep {first['rep']}}}"
        )
        code, out, err = run(
            capsys,
            *deposit_args(
                collection, state, "--translation-of", first["ibip"], "--language", "fr", upload
            ),
        )
        assert code == 0, err
        second = printed(out)
        assert f"linked {first['rep']}: translations fr: {second['rep']}" in out
        assert wait_until(lambda: answered(second["rep"]).get("ibi"), 1.0)
    finally:
        assert serve.stop() == 0
