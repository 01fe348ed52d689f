"""What bounds one harvest (issue 30): a provider whose list never ends is stopped at a cap
(records, bytes, seconds, the Retry-After waits added up), saying which, what came before
applied and kept, memory flat meanwhile (bench/oai_endless.py measures it); and a redirect
away from the provider's host to an internal address is refused (common/netguard)."""

from __future__ import annotations

from pathlib import Path

import pytest

from archive_service.cli import main
from archive_service.imports.oaipmh import Harvest, HarvestError, Limits
from oai_provider import Answer, Endless, fixture_record, started_provider, unavailable
from resolver_support import ThreadedServer

pytestmark = pytest.mark.process


@pytest.fixture
def endless():
    with started_provider(Endless(page_size=100, record_bytes=3000)) as provider:
        yield provider


def test_an_endless_list_stops_at_max_records(endless) -> None:
    run = Harvest(endless.url, limits=Limits(timeout=5, max_records=250))
    records = list(run)
    assert len(records) == run.count == 250
    assert run.stopped == "the harvest reached oai_max_records (250)"
    assert endless.pages == 3


def test_an_endless_list_stops_at_max_bytes(endless) -> None:
    run = Harvest(endless.url, limits=Limits(timeout=5, max_total_bytes=1_000_000))
    records = list(run)
    assert run.stopped == "the harvest reached oai_max_bytes (1000000 bytes of responses)"
    assert 0 < len(records) < 400  # the pages read whole before the bytes ran out


def test_an_endless_list_stops_at_max_seconds(endless) -> None:
    run = Harvest(endless.url, limits=Limits(timeout=5, max_seconds=1))
    records = list(run)
    assert run.stopped == "the harvest reached oai_max_seconds (1 s)"
    assert len(records) == run.count


def test_retry_after_waits_stop_at_their_sum(oai_provider) -> None:
    oai_provider.add(fixture_record(1))
    oai_provider.answers.extend(unavailable("2") for _ in range(10))
    waits: list[float] = []
    limits = Limits(timeout=5, retries=9, max_retry_wait=5)
    run = Harvest(oai_provider.url, limits=limits, sleep=waits.append)
    assert list(run) == []
    assert waits == [2, 2]  # a third would make 6 s of waiting
    assert (
        run.stopped == "the provider's Retry-After waits would pass oai_max_retry_wait (5 s in all)"
    )


def test_the_command_stops_at_a_cap_with_one_line_and_keeps_what_came(
    endless, tmp_path: Path, capsys
) -> None:
    collection = tmp_path / "collection"
    collection.mkdir()
    status = main(
        ["import", "oai-pmh", endless.url, "--collection", str(collection)]
        + ["--state-dir", str(tmp_path / "state"), "--archiveaddress", "archive.example.org"]
        + ["--archiveip", "192.0.2.10", "--granularity", "0.001", "--oai-max-records", "600"]
    )
    out, err = capsys.readouterr()
    assert status == 1, err
    assert (
        "archive-service import oai-pmh: stopped: the harvest reached oai_max_records (600); "
        "the 600 records harvested before were applied and kept"
    ) in err.splitlines()
    assert out.splitlines()[-1].startswith("600 minted, 0 updated")
    assert len(list(collection.rglob("item.yaml"))) == 600
    assert not (tmp_path / "state" / "oai-pmh.json").exists()  # the next run starts over


def redirecting(target: str) -> ThreadedServer:
    """A server that answers every request with a 302 to `target` (and the same query)."""

    def app(environ, start_response):
        query = environ.get("QUERY_STRING", "")
        start_response("302 Found", [("Location", f"{target}?{query}")])
        return [b""]

    return ThreadedServer(app, 0)


def test_a_redirect_to_an_internal_address_is_refused(oai_provider) -> None:
    """The base URL is the admin's (trusted as given, here loopback); a redirect away from
    its host to a name that resolves to loopback is not followed there."""
    oai_provider.add(fixture_record(1))
    port = oai_provider.url.split(":")[2].split("/")[0]
    server = redirecting(f"http://localhost:{port}/oai")
    try:
        base = f"http://127.0.0.1:{server.server.server_port}/oai"
        with pytest.raises(HarvestError, match=r"redirected to localhost \(.*\) is an internal"):
            list(Harvest(base, limits=Limits(timeout=5)))
        assert oai_provider.requests == []  # never contacted
        run = Harvest(base, limits=Limits(timeout=5, allow_internal=True))
        assert [r.source_id for r in run] == ["oai:repo.example:1"]
    finally:
        server.close()


def test_a_redirect_on_the_trusted_host_is_followed(oai_provider) -> None:
    oai_provider.add(fixture_record(1))
    path_moved = oai_provider.url.replace("/oai", "/moved")
    oai_provider.answers.append(
        Answer("301 Moved Permanently", [("Location", oai_provider.url + "?verb=Identify")])
    )
    run = Harvest(path_moved, limits=Limits(timeout=5))
    assert [r.source_id for r in run] == ["oai:repo.example:1"]
