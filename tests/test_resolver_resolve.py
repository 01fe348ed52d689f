"""The resolution process (§6.2) over real Archive answers: selection, the language choice,
following next editions and related items, cycles and the round bound, the privacy rule.

The Archives are this project's own Archive apps called in-process through WSGI, so the
answers are exactly what `archive-service serve` sends; only the transport is skipped (the
end-to-end test runs it over real sockets)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from archive_service.resolver import purl, resolve
from archive_service.resolver.resolve import Answer, ArchiveRef, Question, language_score
from archive_service.web import create_app
from resolver_support import (
    BANON,
    COPY_ONLY,
    DELETED,
    DOUBLE,
    E4E,
    LL8,
    NEXT_EDITION,
    NEXT_METADATA,
    PLATFORM,
    SAMPLE,
    SERVICE_A,
    SERVICE_B,
    InProcessArchives,
    build_collections,
)

A_ADDR, B_ADDR = "archive-a.example", "archive-b.example"
A = ArchiveRef(A_ADDR, SERVICE_A)
B = ArchiveRef(B_ADDR, SERVICE_B)
EXAMPLE_6_8_LANGUAGES = "pt-br,fr;q=0.8,en;q=0.5,pt;q=0.3"


def archive_app(collection: Path, ref: ArchiveRef, state: Path):
    return create_app(
        {
            "collection": str(collection),
            "archiveaddress": ref.address,
            "archiveserviceibi": ref.serviceibi,
            "platformsoftware": PLATFORM,
            "resolver": "none",
            "state_dir": str(state),
        }
    )


@pytest.fixture(scope="module")
def two_archives(tmp_path_factory) -> InProcessArchives:
    base = tmp_path_factory.mktemp("bed")
    a, b = build_collections(base)
    return InProcessArchives(
        [(A, archive_app(a, A, base / "sa")), (B, archive_app(b, B, base / "sb"))]
    )


@pytest.fixture
def bed(two_archives) -> InProcessArchives:
    """The two Archives (never changed by a test), with a fresh record of what they were asked."""
    two_archives.asked = []
    return two_archives


def run(bed, path, query="", accept=None, rounds=10) -> resolve.Outcome:
    parsed = purl.parse(path, query)
    return resolve.resolve(
        parsed, lambda q: bed.ask(q, "150.163.2.175", parsed.filepath), accept, rounds
    )


def col(address: str, directory: str, name: str) -> str:
    return f"http://{address}/col/{directory}/doc/{name}"


# ------------------------------------------------------------------------- selection


def test_example_8_1_first_round_gives_the_url(bed):
    outcome = run(bed, "8JMKD3MGP8W/35MMLL8")
    assert outcome.status == 302
    assert outcome.url == col(A_ADDR, LL8, "CCSDS%20650.0-B-1.pdf")
    assert outcome.reading.answer.archive == A
    assert [q.ibi for q in outcome.questions] == ["8JMKD3MGP8W/35MMLL8"]


def test_example_8_2_asks_again_for_the_next_edition_with_the_same_verbs(bed):
    outcome = run(bed, "8JMKD3MGP8W/35MMLL8!:(oai_dc)", accept=EXAMPLE_6_8_LANGUAGES)
    assert outcome.url == col(B_ADDR, NEXT_METADATA, "oai_dc.xml")
    assert outcome.reading.answer.archive == B
    assert [(q.ibi, q.verblist) for q in outcome.questions] == [
        ("8JMKD3MGP8W/35MMLL8", "GetLastEdition GetMetadata(oai_dc)"),
        (NEXT_EDITION, "GetLastEdition GetMetadata(oai_dc)"),
    ]
    ack = resolve.acknowledgment(
        outcome.reading,
        "172.16.44.200 150.163.68.1",
        "http://urlib.net/8JMKD3MGP8W/35MMLL8!:(oai_dc)",
    )
    assert set(ack) == {
        "servicesubject",
        "clientinformation.ipaddress",
        "contenttype",
        "ibi",
        "state",
        "url",
        "url.persistent",
        "urlkey",
    }  # Table 6.11
    assert ack["contenttype"] == "Metadata" and ack["state"] == "Original"
    assert ack["ibi"] == f"rep {NEXT_METADATA}"
    assert ack["url"] == outcome.url
    assert ack["urlkey"] == outcome.reading.answer.pairs["urlkey"]


def test_privacy_rule_language_and_required_status_never_reach_archives(bed):
    run(
        bed, "LK47B6W/362SFKH+:", "ibiurl.requireditemstatus=Original", accept=EXAMPLE_6_8_LANGUAGES
    )
    run(bed, "8JMKD3MGP8W/35MMLL8!", "ibiurl.requireditemstatus=Original")
    assert bed.asked
    allowed = {
        "servicesubject",
        "clientinformation.ipaddress",
        "parsedibiurl.ibi",
        "parsedibiurl.filepath",
        "parsedibiurl.verblist",
    }  # Table 6.9
    for _, params in bed.asked:
        assert set(params) <= allowed
        assert "pt" not in params.get("parsedibiurl.verblist", "")
        assert "Original" not in params.values()


def test_an_original_is_preferred_to_a_copy_with_or_without_the_requirement(bed):
    copy_first = InProcessArchives(bed.archives[::-1])  # the Copy's answer arrives first
    for archives in (bed, copy_first):
        for query in ("", "ibiurl.requireditemstatus=Original"):
            outcome = run(archives, "8JMKD3MGP8W/35MME4E", query)
            assert outcome.url == col(A_ADDR, E4E, "CCSDS%20643.0-B-1.pdf"), query
    # The Copy answers too, and wins when the Original's Archive is away.
    alone = InProcessArchives(bed.archives[1:])
    outcome = run(alone, "8JMKD3MGP8W/35MME4E")
    assert outcome.url == col(B_ADDR, E4E, "CCSDS%20643.0-B-1.pdf")
    assert outcome.reading.state == "Copy"


def test_two_original_claims_are_an_alert_naming_the_suspects(bed):
    outcome = run(bed, DOUBLE, "ibiurl.requireditemstatus=Original")
    assert outcome.status == 409 and outcome.url is None
    assert set(outcome.suspects) == {A, B}
    assert "investigation" in outcome.reason
    # Without the requirement the resolver does not look for claims: the first answer wins.
    assert run(bed, DOUBLE).url == col(A_ADDR, DOUBLE, "relatorio-interno.pdf")


def test_original_required_when_only_copies_exist(bed):
    outcome = run(bed, COPY_ONLY, "ibiurl.requireditemstatus=Original")
    assert outcome.status == 404
    assert "no Archive claims to hold the Original" in outcome.reason and A_ADDR in outcome.reason
    assert run(bed, COPY_ONLY).url == col(A_ADDR, COPY_ONLY, "index.html")


def test_deleted_and_unknown_ibis_are_404_with_the_reason(bed):
    deleted = run(bed, DELETED)
    assert deleted.status == 404
    assert "removed on 2015-03-02T09:15:00Z" in deleted.reason and A_ADDR in deleted.reason
    unknown = run(bed, "8JMKD3MGP8W/35MMLL9")
    assert unknown.status == 404
    assert "not known to any of the 2 included Archives" in unknown.reason
    missing = run(bed, "LK47B6W/362SFKH/nothing.here")
    assert missing.status == 404 and "file /nothing.here" in missing.reason


def test_file_list_and_file_path_examples_6_6_and_6_7(bed):
    files = run(bed, "LK47B6W/362SFKH", "ibiurl.verblist=GetFileList")
    assert files.url == f"http://{A_ADDR}/{SERVICE_A}/filelist/{BANON}"
    assert run(bed, "LK47B6W/362SFKH/reference.bib").url == col(A_ADDR, BANON, "reference.bib")


# --------------------------------------------------------------------------- languages


@pytest.mark.parametrize(
    "accept,expected",
    [
        ("en", "CCSDS%20643.0-B-1.pdf"),  # Example 6.3: English user, the item itself
        ("pt", "RTC-07.pdf"),  # Portuguese user, the translation
        ("pt-BR", "RTC-07.pdf"),  # a regional preference finds the language
        (EXAMPLE_6_8_LANGUAGES, "RTC-07.pdf"),  # first choice pt-br beats en at q=0.5
        ("fr, de;q=0.5", "CCSDS%20643.0-B-1.pdf"),  # nothing wanted: the item in its own language
        (None, "CCSDS%20643.0-B-1.pdf"),
        ("en;q=0.2, pt;q=0.9", "RTC-07.pdf"),  # weights, not order
        ("pt;q=0, *", "CCSDS%20643.0-B-1.pdf"),  # q=0 refuses Portuguese
    ],
)
def test_translation_chosen_by_accept_language(bed, accept, expected):
    outcome = run(bed, "8JMKD3MGP8W/35MME4E+", accept=accept)
    assert outcome.url.endswith("/" + expected), outcome.url
    assert outcome.reading.answer.archive == A


def test_a_translation_named_in_the_modifier_ignores_the_browser(bed):
    outcome = run(bed, "8JMKD3MGP8W/35MME4E+(pt)", accept="en")
    assert outcome.url.endswith("/RTC-07.pdf")


def test_language_score_ranks_exact_then_primary_then_any():
    prefs = resolve.preferences("pt-BR, en;q=0.5, *;q=0.1")
    assert language_score("pt-BR", prefs) > language_score("pt", prefs)
    assert language_score("pt", prefs) > language_score("en", prefs)
    assert language_score("en", prefs) > language_score("fr", prefs) > language_score(None, prefs)


def test_only_the_users_first_languages_are_weighed():
    """Every range was scored against every translation of every answer, at each look at a
    round's answers: an 8 KB Accept-Language (2,600 ranges) and an answer of 30,000
    translations (1 MiB, a hostile Archive's) cost 4 s of CPU per look, holding the worker."""
    many = ",".join(f"{chr(97 + i % 26)}{chr(97 + i // 26 % 26)};q=0.1" for i in range(2600))
    prefs = resolve.preferences(many + ",pt-BR;q=0.9,en;q=0.5")
    assert len(prefs) <= 32
    assert prefs[:2] == (("pt-br", 0.9), ("en", 0.5))  # the best weighted are kept


# ------------------------------------------------------------------ following, bounds


def make_item(root: Path, rep: str, **sidecar) -> None:
    (root / rep / "doc").mkdir(parents=True)
    (root / rep / "doc" / "file.txt").write_text(rep)
    if sidecar:
        (root / rep / "item.yaml").write_text(yaml.safe_dump(sidecar))


def test_related_items_held_elsewhere_are_asked_for_by_their_ibi(tmp_path):
    # A holds 35MME4E; its Portuguese translation and its metadata live only in B.
    a, b = tmp_path / "A", tmp_path / "B"
    shutil.copytree(SAMPLE / E4E, a / E4E)
    for moved in ("sid.inpe.br/mtc-m18@80/2009/08.25.19.43", E4E + ".47"):
        shutil.copytree(SAMPLE / moved, b / moved)
    bed = InProcessArchives(
        [(A, archive_app(a, A, tmp_path / "sa")), (B, archive_app(b, B, tmp_path / "sb"))]
    )
    translated = run(bed, "8JMKD3MGP8W/35MME4E+", accept="pt")
    assert translated.url == col(B_ADDR, "sid.inpe.br/mtc-m18@80/2009/08.25.19.43", "RTC-07.pdf")
    assert [q.ibi for q in translated.questions] == [
        "8JMKD3MGP8W/35MME4E",
        "sid.inpe.br/mtc-m18@80/2009/08.25.19.43",
    ]
    metadata = run(bed, "8JMKD3MGP8W/35MME4E:")
    assert metadata.url == col(B_ADDR, E4E + ".47", "metadata.html")
    # The English original is still served by A, in one round.
    english = run(bed, "8JMKD3MGP8W/35MME4E+", accept="en")
    assert english.url == col(A_ADDR, E4E, "CCSDS%20643.0-B-1.pdf")
    assert len(english.questions) == 1


def chain_bed(tmp_path: Path, editions: list[str], cycle: bool = False) -> InProcessArchives:
    """Editions alternate between two Archives, so neither can follow the chain alone."""
    a, b = tmp_path / "A", tmp_path / "B"
    for i, rep in enumerate(editions):
        nxt = editions[i + 1] if i + 1 < len(editions) else (editions[0] if cycle else None)
        make_item(a if i % 2 == 0 else b, rep, **({"nextedition": nxt} if nxt else {}))
    a.mkdir(exist_ok=True)
    b.mkdir(exist_ok=True)
    return InProcessArchives(
        [(A, archive_app(a, A, tmp_path / "sa")), (B, archive_app(b, B, tmp_path / "sb"))]
    )


EDITIONS = [f"example.org/rep/2020/01.01.00.0{i}" for i in range(5)]


def test_an_edition_chain_across_archives_is_followed_round_by_round(tmp_path):
    bed = chain_bed(tmp_path, EDITIONS)
    outcome = run(bed, EDITIONS[0] + "!")
    assert outcome.url == col(A_ADDR, EDITIONS[4], "file.txt")
    assert [q.ibi for q in outcome.questions] == EDITIONS


def test_the_number_of_rounds_is_bounded(tmp_path):
    bed = chain_bed(tmp_path, EDITIONS)
    outcome = run(bed, EDITIONS[0] + "!", rounds=3)
    assert outcome.status == 508 and "after 3 rounds" in outcome.reason
    assert len(outcome.questions) == 3


def test_a_cycle_of_next_editions_is_detected(tmp_path):
    bed = chain_bed(tmp_path, EDITIONS[:3], cycle=True)
    outcome = run(bed, EDITIONS[0] + "!")
    assert outcome.status == 508 and "cycle" in outcome.reason
    assert outcome.reason.endswith(
        f"{EDITIONS[0]} -> {EDITIONS[1]} -> {EDITIONS[2]} -> {EDITIONS[0]}"
    )
    assert len(bed.asked) == 3 * 2  # three questions, two Archives, nothing asked twice


# ------------------------------------------------------------------ Archives that fail


def test_archives_that_give_nothing_usable():
    parsed = purl.parse("LK47B6W/362SFKH")
    silent = [Answer(A, {}, 0, error="no answer within 5 s"), Answer(B, {}, 1, error="HTTP 500")]
    outcome = resolve.resolve(parsed, lambda q: silent)
    assert outcome.status == 502 and set(outcome.silent) == {A, B}
    one = [Answer(A, {}, 0), Answer(B, {}, 1, error="HTTP 500")]
    outcome = resolve.resolve(parsed, lambda q: one)
    assert outcome.status == 404 and "1 of them did not answer" in outcome.reason
    assert resolve.resolve(parsed, lambda q: []).status == 503


def test_questions_carry_only_table_6_9_pairs():
    question = Question("LK47B6W/362SFKH", purl.parse("LK47B6W/362SFKH+:").parsed.relation, True)
    assert question.params("1.2.3.4 5.6.7.8", "/a.pdf") == {
        "servicesubject": "urlRequest",
        "clientinformation.ipaddress": "1.2.3.4 5.6.7.8",
        "parsedibiurl.ibi": "LK47B6W/362SFKH",
        "parsedibiurl.filepath": "/a.pdf",
        "parsedibiurl.verblist": "GetTranslation GetMetadata GetFileList",
    }


def test_an_ibi_too_long_to_ask_about_is_not_followed():
    # A hostile Archive's next edition of 30,000 digits went in every included Archive's
    # urlRequest of the next round, and into the answered store, for each of `rounds` rounds:
    # 600 KB written per resolution (the seventh adversarial pass).
    parsed = purl.parse("LK47B6W/362SFKH!")
    long = "evil.example/w" + "7" * 30_000 + "/2020/01.01.00.00"
    asked = []

    def ask(question, **_):
        asked.append(question.ibi)
        return [Answer(A, {"state": "Original", "ibi.nextedition": long}, 0)]

    outcome = resolve.resolve(parsed, ask)
    assert asked == ["LK47B6W/362SFKH"] and outcome.url is None
