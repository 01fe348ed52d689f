"""The reference resolver (issue 32, point 9), with a real `archive-service resolver serve` and
a real `archive-service serve` on loopback: `??` and `?info` after a persistent URL resolve as
`:` does (the item's metadata), and an `Accept` header naming a citation format sends the user
to the item's landing page at the Archive that holds it, which negotiates the format."""

from __future__ import annotations

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
    SAMPLE,
    SERVICE_A,
    included_archive_config,
)
from serve_process import Process, free_port, http_get, wait_until

pytestmark = pytest.mark.process

BIBTEX = "application/x-bibtex"
BROWSER = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"


@pytest.fixture(scope="module")
def bed(tmp_path_factory):
    """(resolver URL, Archive address): the sample collection included in our resolver."""
    base: Path = tmp_path_factory.mktemp("reference")
    state = base / "resolver-state"
    done = subprocess.run(
        [sys.executable, "-m", "archive_service.cli", "resolver", "register"]
        + ["--state-dir", str(state), "--serviceibi", SERVICE_A, "--key", KEY_A],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    port = free_port()
    resolver_url = f"http://127.0.0.1:{port}"
    resolver = Process(
        ["resolver", "serve", "--state-dir", str(state), "--bind", f"127.0.0.1:{port}"],
        base / "resolver.log",
    )
    address = f"127.0.0.1:{free_port()}"
    config = included_archive_config(
        base / "archive.yaml",
        collection=SAMPLE,
        address=address,
        service=SERVICE_A,
        key=KEY_A,
        resolver=f"{resolver_url}/{RESOLVER_IBI}",
        state=base / "archive-state",
    )
    archive = Process(["serve", "--config", str(config)], base / "archive.log")
    try:
        resolver.start()
        resolver.wait_answering(resolver_url + "/")
        archive.start()
        archive.wait_answering(f"http://{address}/")
        registry = Registry(state)
        wait_until(
            lambda: any(r.included for r in registry.records()), what="the Archive to be included"
        )
        yield resolver_url, address
    finally:
        codes = [p.stop() for p in (archive, resolver)]
        assert codes == [0] * len(codes)


@pytest.mark.parametrize("suffix", ["??", "?info"])
def test_the_metadata_inflections_redirect_as_the_colon_does(bed, suffix):
    resolver, _ = bed
    status, headers, _ = http_get(f"{resolver}/{E4E}:")
    assert status == 302 and f"/col/{E4E}.47/" in headers["Location"], headers["Location"]
    inflected = http_get(f"{resolver}/{E4E}{suffix}")
    assert (inflected[0], inflected[1]["Location"]) == (status, headers["Location"])


def test_accept_bibtex_goes_to_the_items_landing_page(bed):
    resolver, address = bed
    status, headers, _ = http_get(f"{resolver}/{LL8}", {"Accept": BIBTEX})
    assert status == 302
    assert headers["Location"] == f"http://{address}/{SERVICE_A}/item/{LL8}"
    assert "Accept" in headers["Vary"]
    # A browser (its */* and application/xml under text/html) still gets the item itself.
    status, headers, _ = http_get(f"{resolver}/{LL8}", {"Accept": BROWSER})
    assert status == 302 and "/item/" not in headers["Location"], headers["Location"]
    assert "/item/" not in http_get(f"{resolver}/{LL8}")[1]["Location"]  # no Accept at all


def test_curl_with_accept_bibtex_gets_bibtex(bed):
    """`curl -LH "Accept: application/x-bibtex" <resolver>/<ibi>`: the redirect followed, the
    landing page (issue 32 points 1-6, branch f32-landing) answers BibTeX."""
    curl = pytest.importorskip("shutil").which("curl")
    if curl is None:
        pytest.skip("curl is not installed")
    resolver, address = bed
    landing = http_get(f"http://{address}/{SERVICE_A}/item/{LL8}", {"Accept": BIBTEX})
    if landing[0] == 404:
        pytest.skip("this Archive has no landing pages yet (issue 32 points 1-6)")
    done = subprocess.run(
        [curl, "-sS", "-L", "-H", f"Accept: {BIBTEX}", f"{resolver}/{LL8}"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.lstrip().startswith("@"), done.stdout[:300]
