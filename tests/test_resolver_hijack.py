"""An included Archive that claims every IBI (issue 30, finding 2), as real processes on
loopback: `archive-service resolver serve`, the project's Archive A (`serve`, the seed's
`sid.inpe.br/mtc-m18@80` Archive at the minting host's address 150.163.34.243), and a hostile
Archive (tests/hostile_archive.py) that answers every urlRequest at once with `state Original`
and a URL of its own. An Archive is trusted to name its own items, nothing more: A's IBIs
go to A on every first resolution, the refused claims are counted and shown."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from archive_service.resolver.registry import Registry
from resolver_support import (
    E4E,
    KEY_A,
    LL8,
    RESOLVER_IBI,
    ROOT,
    SERVICE_A,
    build_collections,
    included_archive_config,
    service_call,
)
from serve_process import Process, free_port, http_get, wait_until

pytestmark = pytest.mark.process

HOSTILE = "evil.example/rep/2020/01.01.00.00"
HOSTILE_KEY = "5555555555"
MINTING_HOST = "150.163.34.243"  # what A's IBIps 8JMKD3MGP8W/… encode (ID Table 7.2)
A_IBIS = [
    LL8,
    E4E,
    "sid.inpe.br/mtc-m18@80/2009/08.25.19.43",
    "8JMKD3MGP8W/35MMLL8",
    "8JMKD3MGP8W/35MME4E",
]


@pytest.fixture(scope="module")
def bed(tmp_path_factory):
    base = tmp_path_factory.mktemp("hijack")
    a, _ = build_collections(base)
    state = base / "resolver-state"
    registry = Registry(state)
    registry.register(SERVICE_A, KEY_A)
    registry.register(HOSTILE, HOSTILE_KEY)
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    service = f"{url}/{RESOLVER_IBI}"
    resolver = Process(
        ["resolver", "serve", "--state-dir", str(state), "--bind", f"127.0.0.1:{port}"]
        + ["--timeout", "3", "--answered-ttl", "0"],  # every resolution a first one
        base / "resolver.log",
    )
    hostile_port = free_port()
    hostile = subprocess.Popen(
        [sys.executable, str(ROOT / "tests" / "hostile_archive.py"), str(hostile_port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    archive_address = f"127.0.0.1:{free_port()}"
    config = included_archive_config(
        base / "a.yaml",
        collection=a,
        address=archive_address,
        service=SERVICE_A,
        key=KEY_A,
        resolver=service,
        state=base / "state-a",
        archiveip=MINTING_HOST,
    )
    archive = Process(["serve", "--config", str(config)], base / "a.log")
    try:
        resolver.start()
        resolver.wait_answering(url + "/")
        wait_until(
            lambda: http_get(f"http://127.0.0.1:{hostile_port}/x")[0] == 200,
            what="the hostile Archive to answer",
        )
        status, text = service_call(
            service,
            servicesubject="inclusionRequest",
            archiveaddress=f"127.0.0.1:{hostile_port}",
            archiveserviceibi=HOSTILE,
            archiveip="127.0.0.1",
            archiveprotocol="HTTP",
            archiveplatformversion="x",
            archiveadmemailaddress="a@b.example",
            registrationkey=HOSTILE_KEY,
        )
        assert status == 200 and "successful" in text, text
        archive.start()
        wait_until(
            lambda: len(registry.included()) == 2, timeout=60, what="Archive A to be included"
        )
        yield {
            "url": url,
            "a": archive_address,
            "hostile": f"127.0.0.1:{hostile_port}",
            "log": base / "resolver.log",
        }
    finally:
        archive.stop()
        resolver.stop()
        hostile.kill()
        hostile.wait()


def test_every_first_resolution_of_an_archives_own_ibis_goes_to_it(bed):
    """Before: the hostile Archive won most first resolutions (15 of 20 in the issue's run),
    sending readers to http://evil.example/phish…"""
    places = []
    for _ in range(4):
        for ibi in A_IBIS:
            status, headers, _ = http_get(f"{bed['url']}/{ibi}")
            places.append((ibi, status, headers.get("Location", "")))
    wrong = [p for p in places if p[1] != 302 or not p[2].startswith(f"http://{bed['a']}/")]
    assert not wrong, wrong


def test_refused_claims_are_counted_shown_and_logged_once_per_pair(bed):
    for ibi in A_IBIS[:2] * 2:
        assert http_get(f"{bed['url']}/{ibi}")[0] == 302
    status, _, body = http_get(f"{bed['url']}/health")
    conflicts = json.loads(body)["conflicts"]
    assert conflicts["refused"] >= 4 and conflicts["pairs"] >= 2
    latest = {c["ibi"]: c for c in conflicts["latest"]}
    for ibi in A_IBIS[:2]:
        assert latest[ibi]["kept"] == f"{bed['a']} (service {SERVICE_A})"
        assert latest[ibi]["refused"] == f"{bed['hostile']} (service {HOSTILE})"
    page = http_get(f"{bed['url']}/")[2].decode()
    assert "Conflicting claims" in page and HOSTILE in page and SERVICE_A in page
    logged = Path(bed["log"]).read_text(errors="replace")
    assert logged.count(f"conflicting claims of the Original of {LL8}:") == 1


def test_an_ibi_no_archive_names_still_goes_to_its_first_claimant(bed):
    """iconet.com.br/banon/… is named by neither Archive: today's rule, the first claim."""
    status, headers, _ = http_get(f"{bed['url']}/iconet.com.br/banon/2009/09.09.22.01")
    assert status == 302
