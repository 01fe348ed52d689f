"""The Archive's OAI-PMH data provider (issue 33) on a real loopback server, harvested by two
independent clients, Sickle and pyoai (in a venv of its own: it needs lxml < 5, which the
project's lxml excludes), and round-tripped through our own `import oai-pmh` into a second
Archive: the same items with the same Dublin Core, and a deletion in the first carried to the
second as a tombstone by the next incremental import."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from sickle import Sickle

from archive_service.cli import main
from archive_service.index.store import Store, Writer
from archive_service.web import create_app
from resolver_support import ThreadedServer
from serve_process import free_port
from support import ROOT, SERVICE

pytestmark = pytest.mark.process

REMOVED = "iconet.com.br/banon/2012/03.05.08.15"


@pytest.fixture
def served(settings):
    """The sample Archive on a loopback port: (its OAI-PMH base URL, its settings)."""
    port = free_port()
    # The address it hands out is the one it is reached at, so its landing pages resolve.
    settings = {**settings, "archiveaddress": f"127.0.0.1:{port}", "resolver": "http://urlib.net"}
    server = ThreadedServer(create_app(settings), port)
    try:
        yield f"http://127.0.0.1:{port}/{SERVICE}/oai", settings
    finally:
        server.close()


def test_sickle_harvests_every_record_and_the_deletion(served) -> None:
    url, settings = served
    sickle = Sickle(url, max_retries=0)
    assert sickle.Identify().baseURL == url
    records = list(sickle.ListRecords(metadataPrefix="oai_dc", ignore_deleted=False))
    assert len(records) == 15
    deleted = [r.header.identifier for r in records if r.header.deleted]
    assert deleted == ["oai:127.0.0.1:iconet.com.br/banon/2010/01.20.11.05"]
    sets = {s.setSpec for s in sickle.ListSets()}
    assert {"contenttype:Data", "repository:sid.inpe.br:mtc-m19"} <= sets
    in_set = list(sickle.ListIdentifiers(metadataPrefix="oai_dc", set="repository:sid.inpe.br"))
    assert in_set and all(":sid.inpe.br/" in h.identifier for h in in_set)


PYOAI_VENV = ROOT / ".venv" / "pyoai-venv"  # made once, kept with the project's .venv
PYOAI = """
import json, sys
from oaipmh.client import Client
from oaipmh.metadata import MetadataRegistry, oai_dc_reader
registry = MetadataRegistry()
registry.registerReader("oai_dc", oai_dc_reader)
client = Client(sys.argv[1], registry)
records = client.listRecords(metadataPrefix="oai_dc")
print(json.dumps({
    "baseURL": client.identify().baseURL(),
    "records": [
        [h.identifier(), h.isDeleted(), m.getField("title") if m else None]
        for h, m, _ in records
    ],
    "sets": sorted(spec for spec, _, _ in client.listSets()),
}))
"""


@pytest.fixture(scope="session")
def pyoai_python() -> Path:
    python = PYOAI_VENV / "bin" / "python"
    if not python.exists():
        made = subprocess.run(
            [sys.executable, "-m", "venv", str(PYOAI_VENV)], capture_output=True, text=True
        )
        if made.returncode == 0:
            made = subprocess.run(
                [str(python), "-m", "pip", "install", "-q", "pyoai==2.5.0", "lxml<5"],
                capture_output=True,
                text=True,
            )
        if made.returncode != 0:
            shutil.rmtree(PYOAI_VENV, ignore_errors=True)
            pytest.skip(f"cannot install pyoai in a venv of its own: {made.stderr[-300:]}")
    return python


def test_pyoai_harvests_every_record_and_the_deletion(served, pyoai_python) -> None:
    url, _ = served
    done = subprocess.run(
        [str(pyoai_python), "-c", PYOAI, url], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout)
    assert found["baseURL"] == url
    assert len(found["records"]) == 15
    deleted = [ident for ident, gone, _ in found["records"] if gone]
    assert deleted == ["oai:127.0.0.1:iconet.com.br/banon/2010/01.20.11.05"]
    titles = {ident.rpartition(":")[2]: title for ident, _, title in found["records"]}
    assert titles[REMOVED] == ["Apresentação do sistema de resolução de IBI"]
    assert "repository:sid.inpe.br:mtc-m19" in found["sets"]


def run_import(capsys, url: str, collection: Path, state: Path) -> str:
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
            "second.example.org",
            "--archiveip",
            "192.0.2.10",
            "--granularity",
            "0.001",
        ]
    )
    out, err = capsys.readouterr()
    assert status == 0, err
    return out


def sidecars(collection: Path) -> list[dict]:
    return [yaml.safe_load(p.read_text()) for p in sorted(collection.rglob("item.yaml"))]


def values(sidecar: dict, element: str) -> list[str]:
    found = sidecar["dc"][element]  # one value is written as a scalar
    return found if isinstance(found, list) else [found]


def names(collection: Path, sidecar: dict) -> set[str]:
    """The IBIs an imported item is known by in the second Archive: its directory's name and
    its IBIp."""
    found = {
        str(p.parent.relative_to(collection))
        for p in collection.rglob("item.yaml")
        if yaml.safe_load(p.read_text()) == sidecar
    }
    return found | ({sidecar["ibip"]} if sidecar.get("ibip") else set())


def test_round_trip_through_our_import_into_a_second_archive(served, tmp_path, capsys) -> None:
    url, settings = served
    second, state = tmp_path / "second", tmp_path / "second-state"
    second.mkdir()
    run_import(capsys, url, second, state)
    imported = sidecars(second)
    # Every record that is not deleted: an item whose location is its landing page here.
    assert len(imported) == 14
    landing = f"http://{settings['archiveaddress']}/{SERVICE}/item/"
    assert all(s["location"].startswith(landing) for s in imported)
    by_page = {s["location"][len(landing) :]: s for s in imported}
    mine = by_page[REMOVED]
    assert values(mine, "title") == ["Apresentação do sistema de resolução de IBI"]
    assert "http://urlib.net/" + REMOVED in values(mine, "identifier")
    described = by_page["sid.inpe.br/mtc-m18/2012/07.12.18.08"]  # its Metadata item's oai_dc
    assert values(described, "title")[0].startswith("Reference Model for an Open Archival")

    # The relations between them, carried as dc:relation and set again between the new IBIs.
    ibi = {page: names(second, s) for page, s in by_page.items()}
    old_edition = by_page["sid.inpe.br/mtc-m18@80/2009/07.21.14.43"]
    assert old_edition.get("nextedition") in ibi["sid.inpe.br/mtc-m18/2012/07.12.18.08"]
    english = "sid.inpe.br/mtc-m18@80/2009/07.21.13.23"
    portuguese = "sid.inpe.br/mtc-m18@80/2009/08.25.19.43"
    assert by_page[english].get("metadata") in ibi[english + ".47"]
    assert by_page[english + ".47"].get("contenttype") == "Metadata"
    declared = {
        *(by_page[english].get("translations") or {}).items(),
        *(by_page[portuguese].get("translations") or {}).items(),
    }
    assert any(lang == "pt" and other in ibi[portuguese] for lang, other in declared) or any(
        lang == "en" and other in ibi[english] for lang, other in declared
    ), declared

    # A removal in the first Archive is a deleted record, and a tombstone in the second.
    shutil.rmtree(Path(settings["collection"]) / REMOVED)
    Writer(Store(settings["collection"], settings["state_dir"])).refresh()
    run_import(capsys, url, second, state)
    after = {s["location"][len(landing) :]: s for s in sidecars(second)}
    assert after[REMOVED].get("state") == "Deleted"
    assert [k for k, s in after.items() if s.get("state") == "Deleted"] == [REMOVED]
