"""Harvesting an OAI-PMH data provider into Records (issue 21), against the tests' real
provider on loopback (tests/oai_provider.py): paging, from/set, deleted records, records
that cannot be items, and a provider that misbehaves (503, errors, hangs, hostile XML)."""

from __future__ import annotations

import dataclasses
import os
import sys
import time
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from archive_service.imports import oaipmh
from archive_service.imports.oaipmh import DAYS, Harvest, HarvestError, Limits, _Order, since
from archive_service.imports.records import EDITION_OF, Record
from oai_provider import OAI, Answer, endless, fixture_record, record_xml, unavailable

pytestmark = pytest.mark.process

FAST = Limits(timeout=5, max_bytes=1 << 20, retries=3, max_wait=5)


def fill(provider, count: int, **more) -> None:
    for number in range(1, count + 1):
        provider.add(fixture_record(number, **more))


def harvest(provider, **options) -> tuple[Harvest, list]:
    options.setdefault("limits", FAST)
    run = Harvest(provider.url, **options)
    return run, list(run)


def test_every_page_is_harvested_into_records(oai_provider) -> None:
    fill(oai_provider, 250)
    run, records = harvest(oai_provider)
    assert [r.source_id for r in records] == [f"oai:repo.example:{n}" for n in range(1, 251)]
    first = records[0]
    assert first.location == "http://repo.example/record/1"
    assert first.title == "Record 1" and first.language == "en"
    assert first.dc["identifier"] == ("oai:repo.example:1", "http://repo.example/record/1")
    assert first.dc["creator"] == ("Banon, Gerald",) and not first.deleted
    assert first.where == "oai record oai:repo.example:1"
    pages = [q for q in oai_provider.requests if q.get("verb") == "ListRecords"]
    assert len(pages) == 3 and all("resumptionToken" in q for q in pages[1:])
    assert run.response_date and run.count == 250 and not run.skipped


def test_deleted_header_is_a_deleted_record(oai_provider) -> None:
    fill(oai_provider, 3)
    oai_provider.delete("oai:repo.example:2")
    _, records = harvest(oai_provider)
    deleted = {r.source_id: r.deleted for r in records}
    assert deleted == {
        "oai:repo.example:1": False,
        "oai:repo.example:2": True,
        "oai:repo.example:3": False,
    }


def test_record_without_landing_page_is_reported_and_skipped(oai_provider) -> None:
    fill(oai_provider, 3)
    oai_provider.records["oai:repo.example:2"].dc["identifier"] = ["oai:repo.example:2", "x"]
    oai_provider.records["oai:repo.example:3"].dc["identifier"] = [
        "ftp://repo.example/3",
        "https://repo.example/landing/3",
    ]
    run, records = harvest(oai_provider)
    assert [r.source_id for r in records] == ["oai:repo.example:1", "oai:repo.example:3"]
    assert records[1].location == "https://repo.example/landing/3"
    assert run.skipped == [
        "oai record oai:repo.example:2: no http(s) dc:identifier (its landing page)"
    ]


def test_language_not_lang_cc_stays_in_dc_only(oai_provider) -> None:
    fill(oai_provider, 1)
    oai_provider.records["oai:repo.example:1"].dc["language"] = ["por"]
    (record,) = harvest(oai_provider)[1]
    assert record.language is None and record.dc["language"] == ("por",)


def test_set_and_from_are_sent_and_honoured(oai_provider) -> None:
    old = datetime(2020, 1, 1, tzinfo=UTC)
    oai_provider.sets = ("theses",)
    for number in range(1, 11):
        oai_provider.add(
            fixture_record(
                number,
                old + timedelta(days=number),
                sets=("theses",) if number % 2 else (),
            )
        )
    _, records = harvest(oai_provider, set_spec="theses", from_date="2020-01-06T00:00:00Z")
    assert [r.source_id for r in records] == [f"oai:repo.example:{n}" for n in (5, 7, 9)]
    (query,) = [q for q in oai_provider.requests if q.get("verb") == "ListRecords"]
    assert query["set"] == "theses" and query["from"] == "2020-01-06T00:00:00Z"


def test_day_granularity_provider_gets_a_day(oai_provider) -> None:
    oai_provider.granularity = DAYS
    fill(oai_provider, 2)
    _, records = harvest(oai_provider, from_date="2000-01-01T12:30:00Z")
    assert len(records) == 2
    (query,) = [q for q in oai_provider.requests if q.get("verb") == "ListRecords"]
    assert query["from"] == "2000-01-01"


def test_nothing_new_is_no_error(oai_provider) -> None:
    fill(oai_provider, 2)
    run, records = harvest(oai_provider, from_date="2099-01-01")
    assert records == [] and run.response_date


def test_from_is_checked() -> None:
    assert since("2024-05-01") == "2024-05-01"
    with pytest.raises(ValueError, match="YYYY-MM-DD"):
        since("yesterday")


def test_503_retry_after_is_waited_for(oai_provider) -> None:
    fill(oai_provider, 150)
    # Identify, then the second page twice busy: once in seconds, once as an HTTP date.
    waits: list[float] = []
    run = Harvest(oai_provider.url, limits=FAST, sleep=waits.append)
    records = iter(run)
    next(records)  # Identify and the first page are in
    soon = datetime.now(UTC) + timedelta(seconds=3)
    oai_provider.answers.extend(
        [unavailable("2"), unavailable(soon.strftime("%a, %d %b %Y %H:%M:%S GMT"))]
    )
    assert len(list(records)) == 149
    assert waits[0] == 2 and 0 < waits[1] <= 3


def test_503_for_ever_stops_with_a_clear_error(oai_provider) -> None:
    fill(oai_provider, 1)
    oai_provider.answers.extend([unavailable("1")] * 10)
    with pytest.raises(HarvestError, match=r"HTTP 503 to Identify \(tried 4 times\)"):
        Harvest(oai_provider.url, limits=FAST, sleep=lambda s: None).__iter__().__next__()


def test_retry_after_too_long_is_not_waited(oai_provider) -> None:
    oai_provider.answers.append(unavailable("86400"))
    with pytest.raises(HarvestError, match="retry after 86400 s"):
        harvest(oai_provider)


def test_oai_error_is_reported_with_its_code(oai_provider) -> None:
    fill(oai_provider, 1)
    with pytest.raises(HarvestError, match="OAI-PMH error badArgument: 'yesterday'"):
        harvest(oai_provider, from_date="yesterday")
    with pytest.raises(HarvestError, match="OAI-PMH error noSetHierarchy: this repository"):
        harvest(oai_provider, set_spec="theses")


def page(provider, records: str, token: str) -> Answer:
    body = f"<ListRecords>{records}<resumptionToken>{token}</resumptionToken></ListRecords>"
    return Answer(body=provider.envelope(body).encode())


def test_bad_resumption_token_is_reported(oai_provider) -> None:
    fill(oai_provider, 1)
    oai_provider.answers.extend([Answer(body=oai_provider.envelope("<Identify/>").encode())])
    oai_provider.answers.append(page(oai_provider, "", "forged"))
    with pytest.raises(HarvestError, match="badResumptionToken"):
        harvest(oai_provider)


def test_resumption_token_loop_is_stopped(oai_provider) -> None:
    oai_provider.answers.append(Answer(body=oai_provider.envelope("<Identify/>").encode()))
    oai_provider.answers.extend([page(oai_provider, "", "again")] * 5)
    with pytest.raises(HarvestError, match="resumptionToken 'again' sent a second time"):
        harvest(oai_provider)
    assert len(oai_provider.requests) == 3


def test_html_instead_of_xml_is_an_error_not_an_empty_list(oai_provider) -> None:
    fill(oai_provider, 1)
    oai_provider.answers.append(Answer(body=oai_provider.envelope("<Identify/>").encode()))
    oai_provider.answers.append(Answer(body=b"<html><body>Maintenance<br></body></html>"))
    with pytest.raises(HarvestError, match=r"\(ListRecords\): not well-formed XML"):
        harvest(oai_provider)


def test_not_oai_pmh_is_an_error(oai_provider) -> None:
    oai_provider.answers.append(Answer(body=b"<rss><channel/></rss>"))
    with pytest.raises(HarvestError, match="is not OAI-PMH"):
        harvest(oai_provider)


def test_a_provider_that_never_answers_times_out(oai_provider) -> None:
    oai_provider.answers.append(Answer(body=b"", delay=30))
    started = time.monotonic()
    with pytest.raises(HarvestError, match=r"no answer within 1 s"):
        harvest(oai_provider, limits=Limits(timeout=1))
    assert time.monotonic() - started < 5


def test_endless_response_is_cut_at_max_bytes(oai_provider) -> None:
    oai_provider.answers.append(endless())
    started = time.monotonic()
    with pytest.raises(HarvestError, match=r"larger than 1048576 bytes"):
        harvest(oai_provider)
    assert time.monotonic() - started < 5


BILLION_LAUGHS = (
    '<?xml version="1.0"?><!DOCTYPE OAI-PMH [<!ENTITY a "ha">'
    + "".join(f'<!ENTITY {chr(98 + i)} "{("&" + chr(97 + i) + ";") * 10}">' for i in range(9))
    + f']><OAI-PMH xmlns="{OAI}"><responseDate>&j;</responseDate></OAI-PMH>'
).encode()


def test_entity_expansion_is_refused(oai_provider) -> None:
    oai_provider.answers.append(Answer(body=BILLION_LAUGHS))
    started = time.monotonic()
    # libxml2 stops it as it parses (amplification); if it did not, the DTD check would.
    with pytest.raises(HarvestError, match=r"\(Identify\): .*(entity|DTD)"):
        harvest(oai_provider)
    assert time.monotonic() - started < 5


def test_external_entity_is_not_read(oai_provider, tmp_path) -> None:
    secret = tmp_path / "secret"
    secret.write_text("the secret")
    body = (
        f'<?xml version="1.0"?><!DOCTYPE r [<!ENTITY x SYSTEM "file://{secret}">]>'
        f'<OAI-PMH xmlns="{OAI}"><responseDate>&x;</responseDate></OAI-PMH>'
    ).encode()
    oai_provider.answers.append(Answer(body=body))
    with pytest.raises(HarvestError, match="a DTD or an entity") as raised:
        harvest(oai_provider)
    assert "the secret" not in str(raised.value)


def test_deep_nesting_is_refused(oai_provider) -> None:
    deep = b"<a>" * 100_000 + b"</a>" * 100_000
    body = f'<?xml version="1.0"?><OAI-PMH xmlns="{OAI}">'.encode() + deep + b"</OAI-PMH>"
    oai_provider.answers.append(Answer(body=body))
    with pytest.raises(HarvestError, match="not well-formed XML"):
        harvest(oai_provider)


def test_a_response_of_too_many_elements_is_refused_as_it_is_read(oai_provider) -> None:
    """32 MB of `<a/>` (inside the limit on bytes) made a 1 GB tree in the import: elements
    are counted as the response is parsed, and past Limits.max_elements it is an error."""
    fill(oai_provider, 1)
    limits = dataclasses.replace(FAST, max_elements=20_000)
    oai_provider.answers.append(Answer(body=oai_provider.envelope("<Identify/>").encode()))
    oai_provider.answers.append(page(oai_provider, "<a/>" * 30_000, "next"))
    with pytest.raises(HarvestError, match=r"\(ListRecords\): .* more than 20000 XML elements"):
        harvest(oai_provider, limits=limits)
    # A page within the bound is read as before.
    _, records = harvest(oai_provider, limits=limits)
    assert [r.source_id for r in records] == ["oai:repo.example:1"]


def test_unreachable_provider_is_a_clear_error() -> None:
    from serve_process import free_port

    url = f"http://127.0.0.1:{free_port()}/oai"
    with pytest.raises(HarvestError, match=f"{url} \\(Identify\\): ConnectError"):
        list(Harvest(url, limits=FAST))


def test_retry_after_of_no_ascii_number_is_the_default_wait(oai_provider) -> None:
    """`Retry-After: ²` (latin-1 0xB2): str.isdigit says yes, float says no; it was a
    ValueError out of the harvest, a traceback of the command."""
    fill(oai_provider, 1)
    oai_provider.answers.extend([unavailable("\u00b2"), unavailable("1\u00b2")])
    waits: list[float] = []
    limits = Limits(timeout=5, default_wait=2)
    run = Harvest(oai_provider.url, limits=limits, sleep=waits.append)
    assert len(list(run)) == 1
    assert waits == [2, 2]


def test_headers_a_byte_at_a_time_are_cut_at_the_deadline() -> None:
    """Each byte of the headers within the read timeout, the whole never: httpx's timeouts
    are per read, and the deadline of a response began only with its body (100 KB of headers
    at a byte a minute: 70 days)."""
    import socket
    import threading

    stop = threading.Event()
    server = socket.create_server(("127.0.0.1", 0))

    def trickle() -> None:
        connection, _ = server.accept()
        with connection:
            connection.recv(65536)
            connection.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/xml\r\nX-Slow: ")
            for _ in range(30):  # 9 s, then it gives up: the test ends before the fix too
                if stop.wait(0.3):
                    return
                try:
                    connection.sendall(b"a")
                except OSError:
                    return

    thread = threading.Thread(target=trickle, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{server.getsockname()[1]}/oai"
    started = time.monotonic()
    try:
        with pytest.raises(HarvestError, match=r"\(Identify\): no answer within 1 s"):
            list(Harvest(url, limits=Limits(timeout=1)))
        assert time.monotonic() - started < 4
    finally:
        stop.set()
        server.close()
        thread.join(5)


def test_new_tokens_for_ever_without_new_records_are_stopped(oai_provider) -> None:
    """A new token with every page, and never a record not listed before (a provider whose
    cursor does not move, or that lists nothing for ever): no token comes twice, so the
    loop check never saw it, and the harvest went on as long as the provider liked."""
    fill(oai_provider, 1)
    (same,) = [record_xml(r) for r in oai_provider.records.values()]
    oai_provider.answers.append(Answer(body=oai_provider.envelope("<Identify/>").encode()))
    oai_provider.answers.extend(
        page(oai_provider, same if n % 2 else "", f"token-{n}") for n in range(200)
    )
    limits = Limits(timeout=5, max_stale_pages=20)
    with pytest.raises(HarvestError, match=r"20 pages in a row .* no record not listed before"):
        list(Harvest(oai_provider.url, limits=limits))
    assert len(oai_provider.requests) == 1 + 22  # the second page listed the record first


@given(
    st.lists(
        st.tuples(st.integers(0, 7), st.sampled_from(["edition_of", "metadata_of", None])),
        min_size=1,
        max_size=12,
    ),
    st.booleans(),
    st.randoms(use_true_random=False),
)
def test_records_wait_for_the_record_they_name(listed, changed, random) -> None:
    """An Archive's relations come back in an order the import takes: a record naming an
    edition or item of the same harvest comes after it, each record kept (listed again, the
    latest last), none lost."""
    rank = random.sample(range(12), 12)  # relations go up in rank only: no cycle (refused)
    records = []
    for i, (other, key) in enumerate(listed):
        relations = {key: [f"oai:h:{other}"]} if key and rank[other] > rank[i] else {}
        records.append(Record(f"oai:h:{i}", relations=relations, title=f"first {i}"))
    if changed:  # the first listed again, changed while the harvest paged
        records.append(dataclasses.replace(records[0], title="again", relations={}))
    order = _Order(batch=3)
    out = [r for record in records for r in order.put(record)] + list(order.rest())
    ids = [r.source_id for r in out]
    assert set(ids) == {r.source_id for r in records}
    assert len(ids) <= len(records)  # a record held and listed again goes once
    assert all(isinstance(v, str) for r in out for v in r.relations.values())
    for place, record in enumerate(out):
        for other in record.relations.values():
            if other in ids:
                assert ids.index(other) < place, (ids, record)
    if changed:  # the import applies the last one listed
        assert [r for r in out if r.source_id == "oai:h:0"][-1].title == "again"


def test_records_held_for_a_relation_are_bounded_in_bytes_too():
    """A record naming an edition or metadata record not met yet is held until it is; a
    hostile provider's records each name one it never lists, each with 32 KiB of Dublin Core
    (what a record may carry): held up to 10,000 records, the import's peak RSS went from 87
    to 337 MB at 9,000 such records (issue 30, eighth adversarial pass). Past the characters
    held, a record goes as it is, as past the number."""
    text = "x" * oaipmh.MAX_DC_BYTES  # one string: what is counted, not what is allocated
    order = _Order(batch=None)
    out = []
    for i in range(2000):
        record = Record(
            f"oai:h:{i}", relations={EDITION_OF: [f"oai:h:never-{i}"]}, dc={"description": (text,)}
        )
        out += order.put(record)
    held = 2000 - len(out)
    assert held * sys.getsizeof(text) <= oaipmh.MAX_HELD_BYTES
    assert held > 0  # still held while there is room
    assert len(out) + len(list(order.rest())) == 2000
    # A held record listed again is let go of, its characters with it.
    order = _Order(batch=None)
    again = Record("oai:h:a", relations={EDITION_OF: ["oai:h:b"]}, dc={"title": ("t",)})
    assert list(order.put(again)) == [] and list(order.put(again)) == []
    assert order.held_bytes == oaipmh._held_bytes(again)
    assert [r.source_id for r in order.put(Record("oai:h:b"))] == ["oai:h:b", "oai:h:a"]
    assert order.held_bytes == 0 and not order.waits


def _resident() -> int:
    """This process's resident memory in bytes (Linux)."""
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def test_records_held_for_a_relation_cost_what_is_counted():
    """The held records' bound is what they take in memory: a hostile provider's records each
    naming one it never lists, each with 740 one-letter Dublin Core values (a record's 32 KiB
    of oai_dc), were counted 740 characters a record, yet each value is a string of 76 bytes:
    10,000 such records held (MAX_HELD) cost the import some 700 MB (issue 30, twelfth
    adversarial pass; 1,000 took it up 103 MB)."""
    order = _Order(batch=None)
    base = _resident()
    for i in range(oaipmh.MAX_HELD):
        values = tuple(chr(0x101) * 2 for _ in range(740))  # new strings, as lxml gives
        record = Record(
            f"oai:h:{i}", relations={EDITION_OF: [f"oai:h:never-{i}"]}, dc={"subject": values}
        )
        if list(order.put(record)):
            break  # the bound reached: this one goes as it is
        if i % 100 == 0:
            held = _resident() - base
            assert held <= 100_000_000, (i, held)  # MAX_HELD_BYTES and what holds them
    assert order.waits  # held while there was room


def test_a_record_whose_identifier_is_longer_than_any_uri_is_skipped(oai_provider) -> None:
    """An identifier went whole into the record's `where`, each skipped line (1,000 kept,
    counted in lines), the held records and the mapping: a provider's 1 MB identifiers stayed
    in the import, 1 GB for 1,000 skipped records (issue 30, eighth adversarial pass)."""
    fill(oai_provider, 2)
    long = "oai:repo.example:" + "x" * oaipmh.MAX_IDENTIFIER
    oai_provider.add(dataclasses.replace(fixture_record(3), identifier=long))
    oai_provider.add(dataclasses.replace(fixture_record(4), identifier=long + "d", deleted=True))
    run, records = harvest(oai_provider)
    assert [r.source_id for r in records] == ["oai:repo.example:1", "oai:repo.example:2"]
    assert len(run.skipped) == 2 and all(len(line) < 300 for line in run.skipped)
    assert run.skipped[0].startswith("oai record oai:repo.example:xxx")
