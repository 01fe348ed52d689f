"""`archive-service import oai-pmh` (issue 21) against the tests' real OAI-PMH provider on
loopback: records minted once, a re-run (incremental or whole) mints nothing, deletions
upstream become tombstones, and the resolver sends a persistent URL of an imported item to
its landing page (`resolver serve` and `serve` as real processes)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from archive_service.cli import main
from oai_provider import Answer, fixture_record, record_xml
from resolver_support import KEY_A, RESOLVER_IBI, ROOT, SERVICE_A, included_archive_config
from serve_process import Process, free_port, http_get, wait_until

pytestmark = pytest.mark.process


def run(capsys, url: str, collection: Path, state: Path, *more: str) -> tuple[int, str, str]:
    status = main(
        [
            "import",
            "oai-pmh",
            url,
            "--collection",
            str(collection),
            "--state-dir",
            str(state),
            "--archiveaddress",
            "archive.example.org",
            "--archiveip",
            "192.0.2.10",
            "--granularity",
            "0.001",
            *more,
        ]
    )
    out, err = capsys.readouterr()
    return status, out, err


def counts(out: str) -> dict[str, int]:
    line = out.strip().splitlines()[-1]
    found = re.fullmatch(
        r"(?:dry run: )?(\d+) (?:would be )?minted, (\d+) (?:would be )?updated, (\d+) "
        r"(?:would be )?turned into tombstones, \d+ relations (?:would be )?set, (\d+) unchanged",
        line,
    )
    assert found, line
    return dict(zip(("minted", "updated", "deleted", "unchanged"), map(int, found.groups())))


def three_records(provider, tmp_path: Path) -> tuple[Path, Path]:
    """The provider holds records 1-3; (an empty collection, its state directory)."""
    for number in range(1, 4):
        provider.add(fixture_record(number))
    collection = tmp_path / "collection"
    collection.mkdir()
    return collection, tmp_path / "state"


def sidecars(collection: Path) -> list[dict]:
    return [yaml.safe_load(p.read_text()) for p in sorted(collection.rglob("item.yaml"))]


@pytest.mark.slow
def test_thousands_of_records_minted_once_deletions_become_tombstones(
    oai_provider, tmp_path, capsys
) -> None:
    # 2,500 records over ten pages: each page's token followed, the counts past a page's
    # (10,000 cost two minutes of CI for nothing more; bench/import_oai.py takes the scale).
    oai_provider.page_size = 250
    for number in range(1, 2_501):
        oai_provider.add(fixture_record(number))
    collection, state = tmp_path / "collection", tmp_path / "state"
    collection.mkdir()

    status, out, err = run(capsys, oai_provider.url, collection, state)
    assert status == 0, err
    assert counts(out) == {"minted": 2_500, "updated": 0, "deleted": 0, "unchanged": 0}
    assert "harvested 2500 records, 0 skipped" in err
    remembered = json.loads((state / "oai-pmh.json").read_text())
    assert list(remembered) == [f"oai-pmh:{oai_provider.url}"]

    # Incremental: from the remembered responseDate, nothing changed, nothing minted.
    status, out, err = run(capsys, oai_provider.url, collection, state)
    assert status == 0, err
    assert counts(out)["minted"] == 0
    assert oai_provider.requests[-1]["from"] == remembered[f"oai-pmh:{oai_provider.url}"]

    # Everything again: still nothing minted, all unchanged.
    status, out, err = run(capsys, oai_provider.url, collection, state, "--from", "1970-01-01")
    assert status == 0, err
    assert counts(out) == {"minted": 0, "updated": 0, "deleted": 0, "unchanged": 2_500}

    for number in range(101, 111):
        oai_provider.delete(f"oai:repo.example:{number}")
    status, out, err = run(capsys, oai_provider.url, collection, state)
    assert status == 0, err
    assert counts(out) == {"minted": 0, "updated": 0, "deleted": 10, "unchanged": 0}
    states = [s.get("state", "Original") for s in sidecars(collection)]
    assert states.count("Deleted") == 10 and states.count("Original") == 2_490


def test_dry_run_changes_nothing_and_remembers_nothing(oai_provider, tmp_path, capsys) -> None:
    collection, state = three_records(oai_provider, tmp_path)
    status, out, err = run(capsys, oai_provider.url, collection, state, "--dry-run")
    assert status == 0, err
    assert counts(out)["minted"] == 3 and "mint oai:repo.example:1" in out
    assert sidecars(collection) == [] and not (state / "oai-pmh.json").exists()


def test_skipped_record_is_named_and_the_rest_imported(oai_provider, tmp_path, capsys) -> None:
    for number in range(1, 4):
        oai_provider.add(fixture_record(number))
    oai_provider.records["oai:repo.example:2"].dc["identifier"] = ["urn:nbn:2"]
    collection, state = tmp_path / "collection", tmp_path / "state"
    collection.mkdir()
    status, out, err = run(capsys, oai_provider.url, collection, state)
    assert status == 0, err
    assert counts(out)["minted"] == 2
    assert "skipped: oai record oai:repo.example:2: no http(s) dc:identifier" in err
    (first, _) = sidecars(collection)
    assert first["location"] == "http://repo.example/record/1"
    assert first["dc"]["creator"] == "Banon, Gerald"


def test_provider_error_stops_before_anything_changes(oai_provider, tmp_path, capsys) -> None:
    collection, state = tmp_path / "collection", tmp_path / "state"
    collection.mkdir()
    status, _, err = run(capsys, oai_provider.url, collection, state, "--set", "theses")
    assert status == 1
    assert "OAI-PMH error noSetHierarchy" in err and "nothing changed" in err
    assert sidecars(collection) == []


def test_bad_from_date_is_refused_by_the_parser(capsys, tmp_path) -> None:
    with pytest.raises(SystemExit) as raised:
        main(["import", "oai-pmh", "http://x/oai", "--from", "last week"])
    assert raised.value.code == 2
    assert "'last week' is not YYYY-MM-DD" in capsys.readouterr().err


@pytest.mark.slow
def test_resolver_redirects_an_imported_item_to_its_landing_page(
    oai_provider, tmp_path, capsys
) -> None:
    collection, state = three_records(oai_provider, tmp_path)
    status, out, err = run(capsys, oai_provider.url, collection, state, "--verbose")
    assert status == 0, err
    ibis = dict((sid, ibi) for ibi, sid in re.findall(r"minted (\S+) for (\S+)", out))
    ibi = ibis["oai:repo.example:2"]

    resolver_state = tmp_path / "resolver-state"
    done = subprocess.run(
        [sys.executable, "-m", "archive_service.cli", "resolver", "register"]
        + ["--state-dir", str(resolver_state), "--serviceibi", SERVICE_A, "--key", KEY_A],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    resolver_port, archive_port = free_port(), free_port()
    resolver_url = f"http://127.0.0.1:{resolver_port}"
    address = f"127.0.0.1:{archive_port}"
    config = included_archive_config(
        tmp_path / "archive.yaml",
        collection=collection,
        address=address,
        service=SERVICE_A,
        key=KEY_A,
        resolver=f"{resolver_url}/{RESOLVER_IBI}",
        state=state,
    )
    resolver = Process(
        ["resolver", "serve", "--state-dir", str(resolver_state), "--bind"]
        + [f"127.0.0.1:{resolver_port}", "--timeout", "3"],
        tmp_path / "resolver.log",
    ).start()
    archive = Process(["serve", "--config", str(config)], tmp_path / "archive.log")
    try:
        resolver.wait_answering(resolver_url + "/")
        archive.start()
        archive.wait_log("status.archive included status.confirmation successful")
        status, headers, body = wait_until(
            lambda: (
                (got := http_get(f"{resolver_url}/{ibi}", {"X-Forwarded-For": "192.0.2.7"}))
                and got[0] == 302
                and got
            ),
            what="the resolver to redirect",
        )
        assert headers["Location"] == "http://repo.example/record/2"
    finally:
        assert archive.stop() == 0
        assert resolver.stop() == 0


def test_record_listed_twice_is_imported_once_as_last_listed(
    oai_provider, tmp_path, capsys
) -> None:
    """A record changed while a harvest pages through the list may come twice (in an early
    page and again in a later one): the later one is the record now."""
    collection, state = three_records(oai_provider, tmp_path)
    older = fixture_record(2)
    older.dc["title"] = ["Record 2, before its change"]
    oai_provider.answers.append(Answer(body=oai_provider.envelope("<Identify/>").encode()))
    listed = "".join(record_xml(r) for r in (older, *oai_provider.records.values()))
    oai_provider.answers.append(
        Answer(body=oai_provider.envelope(f"<ListRecords>{listed}</ListRecords>").encode())
    )
    status, out, err = run(capsys, oai_provider.url, collection, state)
    assert status == 0, err
    assert counts(out)["minted"] == 3
    titles = sorted(s["dc"]["title"] for s in sidecars(collection))
    assert titles == ["Record 1", "Record 2", "Record 3"]


def test_dc_element_not_of_the_fifteen_is_left_out_not_a_stuck_import(
    oai_provider, tmp_path, capsys
) -> None:
    """A provider's oai_dc with an element simple Dublin Core has not (`dc:audience`,
    `dc:identifier.uri`): the sidecar schema refuses it, so kept it stopped every run at
    that record, the records after it never imported."""
    collection, state = three_records(oai_provider, tmp_path)
    oai_provider.records["oai:repo.example:2"].dc["identifier.uri"] = ["http://x.example/2"]
    status, out, err = run(capsys, oai_provider.url, collection, state)
    assert status == 0, err
    assert counts(out)["minted"] == 3
    second = next(s for s in sidecars(collection) if s["dc"]["title"] == "Record 2")
    assert "identifier.uri" not in second["dc"] and second["dc"]["creator"] == "Banon, Gerald"


def test_dc_whose_sidecar_would_pass_the_bound_is_skipped(oai_provider, tmp_path, capsys) -> None:
    """Under MAX_DC_BYTES as text, but its YAML is larger: each line break of a value is a
    blank line and an indentation in a quoted scalar (32 KiB of text were a 114 KB
    sidecar, which the index and every later revision refuse)."""
    from archive_service.collection import sidecar

    collection, state = three_records(oai_provider, tmp_path)
    oai_provider.records["oai:repo.example:2"].dc["description"] = ["a" + "\na" * 15_000]
    status, out, err = run(capsys, oai_provider.url, collection, state)
    assert status == 0, err
    assert counts(out)["minted"] == 2
    assert "skipped: oai record oai:repo.example:2: its oai_dc is larger than" in err
    for path in collection.rglob("item.yaml"):
        sidecar.read(path)  # within every bound


def test_response_date_not_of_oai_pmh_is_not_the_next_from(oai_provider, tmp_path, capsys) -> None:
    """A provider's responseDate with a fraction and an offset: kept, it was the next run's
    `from`, which the provider refuses (badArgument) on every run until --from is given."""
    collection, state = three_records(oai_provider, tmp_path)
    oai_provider.answers.append(Answer(body=oai_provider.envelope("<Identify/>").encode()))
    listed = "".join(record_xml(r) for r in oai_provider.records.values())
    body = oai_provider.envelope(f"<ListRecords>{listed}</ListRecords>")
    body = re.sub(r"<responseDate>[^<]*", "<responseDate>2024-05-01T12:00:00.5+02:00", body)
    oai_provider.answers.append(Answer(body=body.encode()))
    status, out, err = run(capsys, oai_provider.url, collection, state)
    assert status == 0, err
    assert counts(out)["minted"] == 3
    status, out, err = run(capsys, oai_provider.url, collection, state)
    assert status == 0, err
    assert counts(out) == {"minted": 0, "updated": 0, "deleted": 0, "unchanged": 3}
