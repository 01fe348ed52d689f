"""Whose claim of an Original stands when several Archives claim one IBI (SPEC §6, "several
claims of one original"; issue 30): the naming authority (protocol/authority.py), else the
remembered claimant, else the first; and how refused claims are counted and logged."""

from __future__ import annotations

import logging
import socket
import time
from datetime import UTC, datetime

from hypothesis import given
from hypothesis import strategies as st

from archive_service.protocol import ibip
from archive_service.protocol.authority import covers
from archive_service.resolver import archives, lookups, purl
from archive_service.resolver.answered import Answered
from archive_service.resolver.conflicts import Conflicts
from archive_service.resolver.resolve import Answer, ArchiveRef, resolve, settle_claims
from archive_service.resolver.resolve import _reached_at as reached_at
from archive_service.resolver.stores.answered import OWNER_GRACE

SEED_ARCHIVE = "sid.inpe.br/mtc-m18@80/2008/03.17.15.17"
GOOD = ArchiveRef("good.example", SEED_ARCHIVE, "150.163.34.243")
EVIL = ArchiveRef("evil.example", "evil.example/rep/2020/01.01.00.00", "203.0.113.9")
OTHER = ArchiveRef("other.example", "other.example/rep/2020/01.01.00.00", "198.51.100.7")
LL8 = "sid.inpe.br/mtc-m18@80/2009/07.21.14.43"
ORIGINAL = [("url", "http://x.example/a"), ("state", "Original")]


def claim(archive: ArchiveRef, order: int, pairs=ORIGINAL) -> Answer:
    return Answer.of(archive, pairs, order)


def test_repository_names_are_covered_by_the_host_and_word_of_the_service_ibi():
    assert covers(LL8, SEED_ARCHIVE)
    assert covers("SID.INPE.BR./mtc-m18/2009/07.21.14.43", SEED_ARCHIVE)  # case, port 80
    assert covers("sid.inpe.br/mtc-m18.8080/2009/07.21.14.43", SEED_ARCHIVE)
    assert not covers("sid.inpe.br/mtc-m19/2013/09.04.12.27.57", SEED_ARCHIVE)
    assert not covers("inpe.br/mtc-m18/2009/07.21.14.43", SEED_ARCHIVE)
    assert not covers(LL8, "8JMKD3MGP8W/35MMLL8", "150.163.34.243")
    assert not covers("not an ibi", SEED_ARCHIVE)


def test_ibips_are_covered_by_the_archiveip_or_the_service_ibips_address():
    assert covers("8JMKD3MGP8W/35MMLL8", SEED_ARCHIVE, "150.163.34.243")  # ID Table 7.2
    assert not covers("8JMKD3MGP8W/35MMLL8", SEED_ARCHIVE, "127.0.0.1")
    assert not covers("8JMKD3MGP8W/35MMLL8", SEED_ARCHIVE, "not an address")
    assert covers("8JMKD3MGP8W/35MMLL8", "8JMKD3MGP8W/2")  # minted by the same host
    assert covers("LK47B6W/362SFKH", "x.example/w/2020/01.01.00.00", "127.0.0.1")


@given(
    st.ip_addresses().filter(lambda ip: not str(ip).startswith("0")),
    st.ip_addresses(),
    st.integers(1, 65535),
    st.datetimes(datetime(1995, 8, 2), datetime(2200, 1, 1), timezones=st.just(UTC)),
)
def test_an_ibip_is_covered_by_the_address_it_was_minted_at_and_no_other(ip, other, port, when):
    minted = ibip.encode(str(ip), port, when)
    assert covers(minted, "x.example/w/2020/01.01.00.00", str(ip))
    assert covers(minted, "x.example/w/2020/01.01.00.00", str(other)) == (ip == other)


def test_the_naming_authority_wins_though_it_answered_last():
    answers = [claim(EVIL, 0), claim(OTHER, 1), claim(GOOD, 2)]
    claims = settle_claims(answers, LL8)
    assert claims.owner == SEED_ARCHIVE.lower() and claims.refused == {0, 1}
    assert [(c.taken, c.refused) for c in claims.conflicts] == [
        (str(GOOD), str(EVIL)),
        (str(GOOD), str(OTHER)),
    ]


def test_without_an_authority_the_remembered_claimant_wins_then_the_first():
    ibi = "iconet.com.br/banon/2011/06.14.16.40"
    answers = [claim(EVIL, 0), claim(OTHER, 1)]
    assert settle_claims(answers, ibi).refused == {1}
    remembered = settle_claims(answers, ibi, owner=OTHER.serviceibi.lower())
    assert remembered.refused == {0}
    assert remembered.conflicts[0].why == "the Archive remembered for the IBI"
    assert settle_claims([claim(EVIL, 0)], ibi) == settle_claims([claim(EVIL, 0)], ibi, None)
    assert not settle_claims([claim(EVIL, 0)], ibi).conflicts


def test_an_archive_announcing_anothers_address_is_no_authority_over_its_ibips():
    """An IBIp's authority is the `archiveip` an Archive announced itself: a registered hostile
    Archive announcing the good one's address covered its IBIps too, and won whenever it
    answered first (the adversarial pass over issue 30). Two that cover an IBI are no
    authority over each other: the remembered claimant stands, else the first."""
    ip = "150.163.2.10"
    ibi = ibip.encode(ip, 80, 1.7e9)
    good = ArchiveRef("archive.inpe.br", "sid.inpe.br/mtc-m18@80/2008/03.17.15.17", ip)
    evil = ArchiveRef("evil.example.org", "evil.example.org/ev/2024/01.01.00.00", ip)
    assert covers(ibi, evil.serviceibi, evil.ip) and covers(ibi, good.serviceibi, good.ip)
    answers = [claim(evil, 0), claim(good, 1)]
    assert settle_claims(answers, ibi, owner=good.serviceibi.lower()).refused == {0}
    first = settle_claims(answers, ibi)
    assert first.refused == {1}
    assert all(c.why != "the naming authority of the IBI" for c in first.conflicts)


def test_a_silent_remembered_claimant_is_not_displaced():
    ibi = "iconet.com.br/banon/2011/06.14.16.40"
    owner = OTHER.serviceibi.lower()
    silent = Answer(OTHER, {}, 1, error="no answer within 3 s")
    claims = settle_claims([claim(EVIL, 0), silent], ibi, owner)
    assert claims.owner == owner and claims.refused == {0}
    assert claims.conflicts[0].refused == str(EVIL)
    not_asked = settle_claims([claim(EVIL, 0)], ibi, owner)  # excluded, or set aside
    assert not_asked.refused == {0}


def test_a_remembered_claimant_that_no_longer_claims_gives_way():
    ibi = "iconet.com.br/banon/2011/06.14.16.40"
    owner = OTHER.serviceibi.lower()
    for gone in (Answer(OTHER, {}, 1), claim(OTHER, 1, [("url", "http://o/"), ("state", "Copy")])):
        claims = settle_claims([claim(EVIL, 0), gone], ibi, owner)
        assert claims.owner == EVIL.serviceibi.lower() and not claims.conflicts


def test_conflicts_are_counted_each_time_and_logged_once_per_ibi_and_pair(caplog):
    conflicts = Conflicts()
    claims = settle_claims([claim(EVIL, 0), claim(GOOD, 1)], LL8)
    with caplog.at_level(logging.WARNING, "archive_service.resolver.conflicts"):
        for _ in range(3):
            for conflict in claims.conflicts:
                conflicts(conflict)
    counts = conflicts.counts()
    assert (counts["refused"], counts["pairs"]) == (3, 1)
    assert counts["latest"] == [
        {"ibi": LL8, "kept": str(GOOD), "refused": str(EVIL), "why": claims.conflicts[0].why}
    ]
    assert len(caplog.records) == 1 and str(EVIL) in caplog.text and str(GOOD) in caplog.text


def test_the_owner_is_remembered_with_the_holders():
    answered = Answered(60)
    answered.remember(LL8, ["a/b/2020/01.01.00.00", SEED_ARCHIVE], owner=SEED_ARCHIVE)
    assert answered.owner(LL8.upper()) == SEED_ARCHIVE.lower()
    assert answered.recall(LL8) == {"a/b/2020/01.01.00.00", SEED_ARCHIVE.lower()}
    answered.remember(LL8, [])
    assert answered.owner(LL8) is None


def test_an_answer_whose_url_was_refused_claims_nothing():
    refused = claim(EVIL, 0, [("url", "javascript:alert(1)"), ("state", "Original")])
    answers = [refused, claim(OTHER, 1)]
    claims = settle_claims(answers, "iconet.com.br/banon/2011/06.14.16.40")
    assert claims.owner == OTHER.serviceibi.lower() and not claims.conflicts


def test_an_archiveip_counts_only_where_the_archiveaddress_leads():
    """With nobody remembered for an IBIp, a registered Archive announcing the address the
    IBIp encodes (not its own) covered it as much as the Archive at that address, and won
    the first resolution by answering first (the adversarial pass over issue 30). The
    announced archiveip now decides between two that cover it only where the archiveaddress
    is reached; one alone that covers it stays its authority wherever it is reached."""
    ip = "127.0.0.2"
    ibi = ibip.encode(ip, 80, 1.7e9)
    good = ArchiveRef(f"{ip}:8080", "sid.inpe.br/mtc-m18@80/2008/03.17.15.17", ip)
    evil = ArchiveRef("127.0.0.3:8080", "evil.example.org/ev/2024/01.01.00.00", ip)
    first = settle_claims([claim(evil, 0), claim(good, 1)], ibi)
    assert first.refused == {0}, first
    assert first.conflicts[0].why == "the naming authority of the IBI"
    unbracketed = ArchiveRef("[::1]:8080", "x.example/w/2020/01.01.00.00", "::1")
    assert reached_at(unbracketed)
    assert not reached_at(ArchiveRef("no-such-host.invalid", good.serviceibi, ip))
    behind_nat = ArchiveRef("127.0.0.4:8080", good.serviceibi, ip)  # announces, reached elsewhere
    alone = settle_claims([claim(OTHER, 0), claim(behind_nat, 1)], ibi)
    assert alone.refused == {0} and alone.conflicts[0].why == "the naming authority of the IBI"
    both_elsewhere = settle_claims([claim(evil, 0), claim(behind_nat, 1)], ibi)
    assert both_elsewhere.refused == {1}  # neither is its authority: the first claimant


def test_a_name_listing_anothers_address_beside_its_own_is_no_authority(monkeypatch):
    """A registered hostile Archive whose own DNS lists the good Archive's address first and
    its own second, on a port the good one does not listen on, announcing the good one's
    archiveip: the resolver's connection, refused at the first, reached the hostile at the
    second, and any of the name's addresses made its archiveip believed, so it covered the
    good Archive's IBIps and won their first resolutions by answering first (adversarial
    pass over issue 30, second round). Only the address the connection reached counts."""
    good_ip, evil_ip = "127.0.0.2", "127.0.0.9"
    with socket.socket() as evil_listens:
        evil_listens.bind((evil_ip, 0))
        evil_listens.listen()
        port = evil_listens.getsockname()[1]
        real = socket.getaddrinfo

        def getaddrinfo(host, *args, **kwargs):
            if host != "evil.test":
                return real(host, *args, **kwargs)
            if kwargs.get("flags", 0) & socket.AI_NUMERICHOST:
                raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
            return real(good_ip, *args, **kwargs) + real(evil_ip, *args, **kwargs)

        monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
        monkeypatch.setattr(lookups, "_names", {})
        monkeypatch.setattr(lookups, "_reached", {}, raising=False)
        ibi = ibip.encode(good_ip, 80, 1.7e9)
        evil = ArchiveRef(f"evil.test:{port}", "evil.example.org/ev/2024/01.01.00.00", good_ip)
        good = ArchiveRef(f"{good_ip}:{port}", "sid.inpe.br/mtc-m18@80/2008/03.17.15.17", good_ip)
        archives._connect(evil.address, 2, time.monotonic() + 5).close()  # the round's
        assert not reached_at(evil)
        first = settle_claims([claim(evil, 0), claim(good, 1)], ibi)
        assert first.owner == good.serviceibi.lower() and first.refused == {0}
        honest = ArchiveRef(f"evil.test:{port}", evil.serviceibi, evil_ip)
        assert reached_at(honest)


def test_a_round_with_the_remembered_claimant_silent_does_not_forget_it():
    """A round where no Archive claims the Original while the remembered claimant is silent
    forgot it (`remember` with no holders), so the next round went to the first claimant: a
    hostile Archive answering an error to a reader's 8,150-character Via (which the good
    Archive's 8,190-byte header limit refuses too) took an IBI no Archive names on demand,
    then kept it (the ninth adversarial pass: 20 of 20 readers after 3 tries)."""
    ibi = "iconet.com.br/banon/2011/06.14.16.40"
    memory = Answered(300)
    good = [("url", "http://other.example/a"), ("state", "Original")]
    evil = [("url", "http://evil.example/phish"), ("state", "Original")]

    def resolution(answering: dict) -> str | None:
        def ask(question, only=None, skip=(), enough=None, awaited=None):
            answers = []
            for ref in (EVIL, OTHER):  # the hostile Archive answers first
                if (only is not None and ref.key not in only) or ref.key in skip:
                    continue
                pairs = answering[ref]
                if pairs is None:
                    answers.append(Answer(ref, {}, len(answers), error="HTTP 400"))
                else:
                    answers.append(Answer.of(ref, pairs, len(answers)))
            return answers

        return resolve(purl.parse(ibi), ask, None, 10, memory).url

    assert resolution({EVIL: [], OTHER: good}) == "http://other.example/a"
    assert resolution({EVIL: evil, OTHER: good}) == "http://other.example/a"  # remembered
    assert resolution({EVIL: None, OTHER: None}) is None  # the reader's long Via
    assert resolution({EVIL: [], OTHER: None}) is None  # or the good one restarting
    assert memory.owner(ibi) == OTHER.key
    assert resolution({EVIL: evil, OTHER: good}) == "http://other.example/a"


def test_the_remembered_claimant_asked_for_a_file_or_relation_it_lacks_is_not_displaced():
    """It gave way to any claimant when it answered empty, though the question was a file of
    the item (or a translation, an edition) it does not have, not the IBI: one reader's
    `/<ibi>/no-such-file.pdf` made a hostile Archive that claims every IBI the remembered
    owner of one no Archive names, and 20 of 20 readers of the IBI went to it (the ninth
    adversarial pass)."""
    ibi = "iconet.com.br/banon/2011/06.14.16.40"
    memory = Answered(300)
    good = [("url", "http://other.example/a"), ("state", "Original")]
    evil = [("url", "http://evil.example/phish"), ("state", "Original")]

    def resolution(path: str, answering: dict) -> str | None:
        def ask(question, only=None, skip=(), enough=None, awaited=None):
            refs = [r for r in (EVIL, OTHER) if only is None or r.key in only]
            return [Answer.of(r, answering[r], i) for i, r in enumerate(refs) if r.key not in skip]

        return resolve(purl.parse(path), ask, None, 10, memory).url

    assert resolution(ibi, {EVIL: [], OTHER: good}) == "http://other.example/a"
    for question in (f"{ibi}/no-such-file.pdf", f"{ibi}+(xx)", f"{ibi}:(oai_dc)"):
        assert resolution(question, {EVIL: evil, OTHER: []}) is None
        assert memory.owner(ibi) == OTHER.key
    assert resolution(ibi, {EVIL: evil, OTHER: good}) == "http://other.example/a"
    assert resolution(ibi, {EVIL: evil, OTHER: []}) == "http://evil.example/phish"  # moved


def test_an_address_announced_and_not_reached_there_does_not_displace_the_remembered():
    """An Archive that moved host keeps its old IBIps, which encode its old address; an
    included Archive announcing that address (not reached there) covered them, and as their
    naming authority took them from the Archive remembered for them (the ninth adversarial
    pass). Where nobody is remembered such an authority still decides (behind NAT)."""
    old = "150.163.2.10"
    ibi = ibip.encode(old, 80, 1.7e9)
    moved = ArchiveRef("archive.inpe.br", "sid.inpe.br/mtc-m18@80/2008/03.17.15.17", "150.163.9.9")
    evil = ArchiveRef("203.0.113.9:8080", "evil.example.org/ev/2024/01.01.00.00", old)
    answers = [claim(evil, 0), claim(moved, 1)]
    kept = settle_claims(answers, ibi, owner=moved.serviceibi.lower())
    assert kept.owner == moved.serviceibi.lower() and kept.refused == {0}, kept
    silent = Answer(moved, {}, 1, error="no answer within 3 s")
    assert settle_claims([claim(evil, 0), silent], ibi, moved.serviceibi.lower()).refused == {0}
    assert settle_claims(answers, ibi).owner == evil.serviceibi.lower()  # nobody remembered
    reached = ArchiveRef(f"{old}:8080", evil.serviceibi, old)  # reached at what it announced
    taken = settle_claims([claim(reached, 0), claim(moved, 1)], ibi, moved.serviceibi.lower())
    assert taken.owner == reached.serviceibi.lower()


def test_the_remembered_claimant_outlives_answered_ttl_until_a_grace_ends():
    """The owner went with the entry after `answered_ttl` (300 s), and the next round was a
    first-claim race again: a hostile included Archive answering fast won 2 of 5 first
    resolutions after expiry of an IBI no Archive names (the ninth adversarial pass). It now
    stands OWNER_GRACE longer; the holders still expire, so the round after it asks all."""
    ibi = "iconet.com.br/banon/2011/06.14.16.40"
    now = [1.8e9]
    memory = Answered(300, clock=lambda: now[0])
    good = [("url", "http://other.example/a"), ("state", "Original")]
    evil = [("url", "http://evil.example/phish"), ("state", "Original")]
    onlies = []

    def resolution(answering: dict) -> str | None:
        def ask(question, only=None, skip=(), enough=None, awaited=None):
            onlies.append(only)
            refs = [r for r in (EVIL, OTHER) if only is None or r.key in only]
            return [Answer.of(r, answering[r], i) for i, r in enumerate(refs) if r.key not in skip]

        return resolve(purl.parse(ibi), ask, None, 10, memory).url

    assert resolution({EVIL: [], OTHER: good}) == "http://other.example/a"
    now[0] += 301  # the entry expired: every Archive asked, the hostile one first
    onlies.clear()
    assert resolution({EVIL: evil, OTHER: good}) == "http://other.example/a"
    assert onlies == [None]  # the holders routed nothing
    assert memory.owner(ibi) == OTHER.key
    now[0] += 300 + OWNER_GRACE + 1  # past the grace too: the first claimant's again
    assert memory.owner(ibi) is None and memory.recall(ibi) is None
    assert resolution({EVIL: evil, OTHER: good}) == "http://evil.example/phish"


def test_an_excluded_owner_holds_nothing():
    """An owner is kept a week past answered_ttl and, unheard, stands: once excluded it was
    never asked again, and each full round renewed it, so the Archive now holding its items
    had its claims refused for good under steady traffic."""
    ibi = "iconet.com.br/banon/2011/06.14.16.40"
    now = [1.8e9]
    memory = Answered(300, clock=lambda: now[0])
    included = {EVIL.key, OTHER.key}
    claims = {OTHER: [("url", "http://other.example/a"), ("state", "Original")]}

    def resolution() -> str | None:
        def ask(question, only=None, skip=(), enough=None, awaited=None):
            refs = [r for r in (EVIL, OTHER) if r.key in included]
            refs = [r for r in refs if (only is None or r.key in only) and r.key not in skip]
            return [Answer.of(r, claims.get(r, []), i) for i, r in enumerate(refs)]

        return resolve(purl.parse(ibi), ask, None, 10, memory, None, included.__contains__).url

    assert resolution() == "http://other.example/a" and memory.owner(ibi) == OTHER.key
    included.discard(OTHER.key)  # excluded; its items now at EVIL (say, the new host)
    claims[EVIL] = [("url", "http://evil.example/a"), ("state", "Original")]
    now[0] += 301
    assert resolution() == "http://evil.example/a"
    # Routed elsewhere while it is away, but not replaced: past its grace the holder's.
    assert memory.owner(ibi) == OTHER.key
    now[0] += 300 + OWNER_GRACE
    assert resolution() == "http://evil.example/a" and memory.owner(ibi) == EVIL.key


def test_an_owner_restarting_gets_its_ibis_back():
    """serve's SIGTERM sends an exclusionRequest and its start an inclusionRequest: one
    resolution while the owner restarted made a hostile Archive claiming every IBI its owner
    for a week, and 20 of 20 readers after the owner was back went to the hostile URL (real
    processes, the eleventh adversarial pass)."""
    ibi = "iconet.com.br/banon/2011/06.14.16.40"
    now = [1.8e9]
    memory = Answered(300, clock=lambda: now[0])
    included = {EVIL.key, OTHER.key}
    claims = {
        OTHER: [("url", "http://other.example/a"), ("state", "Original")],
        EVIL: [("url", "http://evil.example/phish"), ("state", "Original")],
    }

    def resolution(order) -> str | None:
        def ask(question, only=None, skip=(), enough=None, awaited=None):
            refs = [r for r in order if r.key in included]
            refs = [r for r in refs if (only is None or r.key in only) and r.key not in skip]
            return [Answer.of(r, claims[r], i) for i, r in enumerate(refs)]

        return resolve(purl.parse(ibi), ask, None, 10, memory, None, included.__contains__).url

    assert resolution((OTHER, EVIL)) == "http://other.example/a"
    included.discard(OTHER.key)  # its restart: excluded
    resolution((EVIL, OTHER))
    included.add(OTHER.key)  # back
    for step in (5, 301, 5, 301):
        now[0] += step
        assert resolution((EVIL, OTHER)) == "http://other.example/a"
    assert memory.owner(ibi) == OTHER.key


def test_a_long_ibi_is_judged_each_time_not_remembered():
    """Each (IBI, Archive) judged was kept, whatever the IBI's length: a reader's persistent
    URLs of 8 KB IBIps, each asked once, kept 34 MB a worker (the tenth adversarial pass)."""
    from archive_service.protocol import authority

    kept = authority._kept_covers.cache_info().currsize
    long_ibi = "8JMKD3MGP8W/" + "35MMLL8" * 1150
    assert not covers(long_ibi, EVIL.serviceibi, EVIL.ip)
    assert authority._kept_covers.cache_info().currsize == kept
    assert covers("sid.inpe.br/mtc-m18@80/2099/12.31.23.59", SEED_ARCHIVE, GOOD.ip)  # new here
    assert authority._kept_covers.cache_info().currsize == kept + 1
