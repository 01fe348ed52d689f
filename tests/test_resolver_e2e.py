"""End to end: `archive-service resolver serve` and two `archive-service serve` Archives as
real processes on loopback ports.

Archive A holds the sample's originals but not the 2012 next edition of 8JMKD3MGP8W/35MMLL8;
Archive B holds that edition and its metadata, Copy items of two of A's items and a second
Original of one of them. Both join through serve's own inclusionRequest (and leave through
its exclusionRequest on SIGTERM); the persistent URLs of the seed's
Examples 6.1-6.7, 8.1 and 8.2 are resolved and their redirect targets, the urlRequests and
the acknowledgments each Archive received (from its access log) are checked; then a double
Original claim, a deleted and an unknown IBI, and an Archive stopped with SIGTERM.
"""

from __future__ import annotations

import re
import signal
import subprocess
import sys
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest

from archive_service.resolver.registry import Registry
from resolver_support import (
    BANON,
    COPY_ONLY,
    DELETED,
    DOUBLE,
    E4E,
    KEY_A,
    KEY_B,
    LL8,
    NEXT_EDITION,
    NEXT_METADATA,
    RESOLVER_IBI,
    ROOT,
    SERVICE_A,
    SERVICE_B,
    build_collections,
    included_archive_config,
    received,
)
from serve_process import Process, free_port, http_get, wait_until

pytestmark = pytest.mark.process

URLKEY = re.compile(r"[0-9]{10,}(?:-[0-9]{10,})?")  # Table 5.1
EXAMPLE_6_8_LANGUAGES = "pt-BR,fr;q=0.8,en;q=0.5,pt;q=0.3"
E4E_PT = "sid.inpe.br/mtc-m18@80/2009/08.25.19.43"


class Archive:
    """One `archive-service serve` process and how it joins and leaves the resolver."""

    def __init__(self, bed: Bed, name: str, collection: Path, service: str, key: str):
        self.bed, self.name, self.collection = bed, name, collection
        self.service, self.key = service, key
        self.config = bed.base / f"{name}.yaml"
        self.log = bed.base / f"{name}.log"
        self.process: Process | None = None
        self.address = ""
        self.log_start = 0

    def start(self) -> None:
        port = free_port()  # a new port on every start: the address may change (§5.2)
        self.address = f"127.0.0.1:{port}"
        included_archive_config(
            self.config,
            collection=self.collection,
            address=self.address,
            service=self.service,
            key=self.key,
            resolver=self.bed.service,
            state=self.bed.base / f"state-{self.name}",
        )
        self.log_start = self.log.stat().st_size if self.log.exists() else 0
        self.process = Process(["serve", "--config", str(self.config)], self.log)
        self.process.start()
        self.process.wait_answering(
            f"http://{self.address}/{self.service}?servicesubject=inclusionConfirmationRequest"
        )
        self.join()

    def record(self):
        (record,) = [r for r in self.bed.registry.records() if r.serviceibi == self.service]
        return record

    def join(self) -> None:
        """serve sends inclusionRequest once its socket answers (§5.2, issue 3)."""
        wait_until(
            lambda: self.record().included and self.record().address == self.address,
            what=f"Archive {self.name} to be included",
        )
        # …and serve logs the resolver's status answer.
        wait_until(
            lambda: "status.archive included status.confirmation successful" in self.this_run(),
            what=f"Archive {self.name} to log its inclusion",
        )

    def stop(self) -> None:
        """SIGTERM: serve sends exclusionRequest before it exits."""
        assert self.process.stop(signal.SIGTERM) == 0
        assert not self.record().included  # the exclusion was answered before serve exited
        assert "status.archive excluded" in self.this_run()

    def this_run(self) -> str:
        """What this start of serve logged (the log file is appended to on every start)."""
        return self.log.read_bytes()[self.log_start :].decode(errors="replace")

    def received(self, subject: str | None = None):
        return received(self.log.read_text(errors="replace"), subject)

    def asked_by(self, ips: str) -> list[dict]:
        return [
            q for q, _ in self.received("urlRequest") if q["clientinformation.ipaddress"] == ips
        ]

    def acks_from(self, ip: str):
        return [
            (q, s)
            for q, s in self.received("acknowledgment")
            if q["clientinformation.ipaddress"].split()[0] == ip
        ]


class Bed:
    def __init__(self, base: Path):
        self.base = base
        self.state = base / "resolver-state"
        port = free_port()
        self.url = f"http://127.0.0.1:{port}"
        self.service = f"{self.url}/{RESOLVER_IBI}"
        a, b = build_collections(base)
        self.a = Archive(self, "A", a, SERVICE_A, KEY_A)
        self.b = Archive(self, "B", b, SERVICE_B, KEY_B)
        for archive in (self.a, self.b):  # §5.1, through the contract command
            done = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "archive_service.cli",
                    "resolver",
                    "register",
                    "--state-dir",
                    str(self.state),
                    "--serviceibi",
                    archive.service,
                    "--key",
                    archive.key,
                ],
                cwd=ROOT,
                capture_output=True,
                text=True,
            )
            assert done.returncode == 0, done.stderr
        self.registry = Registry(self.state)
        self.resolver = Process(
            [
                "resolver",
                "serve",
                "--state-dir",
                str(self.state),
                "--bind",
                f"127.0.0.1:{port}",
                "--timeout",
                "3",
            ],
            base / "resolver.log",
        )

    def start(self) -> None:
        self.resolver.start()
        self.resolver.wait_answering(self.url + "/")
        self.a.start()
        self.b.start()

    def stop(self) -> None:
        codes = [
            process.stop()
            for process in (self.a.process, self.b.process, self.resolver)
            if process is not None
        ]
        assert codes == [0] * len(codes), codes  # SIGTERM is a clean stop for every server

    def archive(self, name: str) -> Archive:
        return {"A": self.a, "B": self.b}[name]

    def get(self, path: str, ip: str, **headers):
        return http_get(self.url + path, {"X-Forwarded-For": ip, **headers})


@pytest.fixture(scope="module")
def bed(tmp_path_factory):
    bed = Bed(tmp_path_factory.mktemp("e2e"))
    try:
        bed.start()
        yield bed
    finally:
        bed.stop()


def test_both_archives_joined_with_confirmation(bed):
    records = {r.serviceibi: r for r in bed.registry.records()}
    for archive in (bed.a, bed.b):
        record = records[archive.service]
        assert record.included and record.confirmation == "successful"
        assert record.address == archive.address
        wait_until(
            lambda archive=archive: [
                q for q, s in archive.received("inclusionConfirmationRequest") if s == 200
            ],
            what="the confirmation in the Archive's log",
        )


# The seed's persistent URLs; the Archive expected to answer and its path of the target.
EXAMPLES = [
    ("6.1-E4E", "/8JMKD3MGP8W/35MME4E", {}, "A", f"/col/{E4E}/doc/CCSDS%20643.0-B-1.pdf"),
    ("6.1-LL8", "/8JMKD3MGP8W/35MMLL8", {}, "A", f"/col/{LL8}/doc/CCSDS%20650.0-B-1.pdf"),
    ("6.1-ibip", "/LK47B6W/362SFKH", {}, "A", f"/col/{BANON}/doc/@relatorio.pdf"),
    ("6.1-rep", f"/{BANON}", {}, "A", f"/col/{BANON}/doc/@relatorio.pdf"),
    ("6.2-free", "/8JMKD3MGP8W/35MME4E:", {}, "A", f"/col/{E4E}.47/doc/metadata.html"),
    ("6.2-oai_dc", "/8JMKD3MGP8W/35MME4E:(oai_dc)", {}, "A", f"/col/{E4E}.47/doc/oai_dc.xml"),
    (
        "6.3-en",
        "/8JMKD3MGP8W/35MME4E+",
        {"Accept-Language": "en"},
        "A",
        f"/col/{E4E}/doc/CCSDS%20643.0-B-1.pdf",
    ),
    (
        "6.3-pt",
        "/8JMKD3MGP8W/35MME4E+",
        {"Accept-Language": EXAMPLE_6_8_LANGUAGES},
        "A",
        f"/col/{E4E_PT}/doc/RTC-07.pdf",
    ),
    (
        "6.3-pt-param",
        "/8JMKD3MGP8W/35MME4E+(pt)",
        {"Accept-Language": "en"},
        "A",
        f"/col/{E4E_PT}/doc/RTC-07.pdf",
    ),
    (
        "6.4-last",
        "/8JMKD3MGP8W/35MMLL8!",
        {},
        "B",
        f"/col/{NEXT_EDITION}/doc/CCSDS%20650.0-M-2.pdf",
    ),
    (
        "6.4-last-oai_dc",
        "/8JMKD3MGP8W/35MMLL8!:(oai_dc)",
        {},
        "B",
        f"/col/{NEXT_METADATA}/doc/oai_dc.xml",
    ),
    (
        "6.5",
        "/8JMKD3MGP8W/35MMLL8?ibiurl.verblist=GetLastEdition+GetMetadata(oai_dc)",
        {},
        "B",
        f"/col/{NEXT_METADATA}/doc/oai_dc.xml",
    ),
    (
        "6.6",
        "/LK47B6W/362SFKH?ibiurl.verblist=GetFileList",
        {},
        "A",
        f"/{SERVICE_A}/filelist/{BANON}",
    ),
    ("6.7", "/LK47B6W/362SFKH/reference.bib", {}, "A", f"/col/{BANON}/doc/reference.bib"),
]


@pytest.mark.parametrize(
    "number,name,path,headers,holder,target",
    [(i, *example) for i, example in enumerate(EXAMPLES)],
    ids=[e[0] for e in EXAMPLES],
)
def test_examples_6_1_to_6_7_redirect_and_acknowledge(
    bed, number, name, path, headers, holder, target
):
    user = f"10.6.0.{number + 1}"  # tells this resolution's messages apart in the logs
    status, response_headers, _ = bed.get(path, user, **headers)
    archive, other = (bed.a, bed.b) if holder == "A" else (bed.b, bed.a)
    location = response_headers["Location"]
    assert (status, location) == (302, f"http://{archive.address}{target}")
    # The Archive that gave the URL was thanked, once, and answered `notice` (HTTP 200);
    # the other was not.
    acks = wait_until(lambda: archive.acks_from(user), what="the acknowledgment")
    ((ack, ack_status),) = acks
    assert ack_status == 200
    assert ack["url"] == location
    assert ack["url.persistent"] == bed.url + path
    assert ack["clientinformation.ipaddress"] == f"{user} 127.0.0.1"
    assert URLKEY.fullmatch(ack["urlkey"])
    assert other.acks_from(user) == []
    # The resolver's access log says where the user went, and from which Archive.
    assert wait_until(
        lambda: any(
            f"GET {path} " in line and line.endswith(f'"{location}" {archive.service}')
            for line in bed.resolver.text().splitlines()
        ),
        what="the resolution's access log line",
    )
    # And the URL really serves the item.
    status, _, body = http_get(location)
    assert status == 200
    if target.startswith("/col/"):
        assert body == (archive.collection / unquote(target[len("/col/") :])).read_bytes()
    else:
        assert b"reference.bib" in body


def test_example_8_1(bed):
    user = "172.16.44.200"
    status, headers, _ = bed.get("/8JMKD3MGP8W/35MMLL8", user)
    url = f"http://{bed.a.address}/col/{LL8}/doc/CCSDS%20650.0-B-1.pdf"
    assert (status, headers["Location"]) == (302, url)
    ips = f"{user} 127.0.0.1"
    question = {
        "servicesubject": "urlRequest",
        "clientinformation.ipaddress": ips,
        "parsedibiurl.ibi": "8JMKD3MGP8W/35MMLL8",
    }
    # "Solicitar URL" to every included Archive the first time; once A has answered for
    # this IBI (example 6.1 above, when the module runs whole), to A alone (issue 24).
    assert wait_until(lambda: bed.a.asked_by(ips), what="the urlRequest in the log") == [question]
    assert bed.b.asked_by(ips) in ([], [question])
    ((ack, ack_status),) = wait_until(lambda: bed.a.acks_from(user), what="the acknowledgment")
    assert ack_status == 200
    assert ack == {
        "servicesubject": "acknowledgment",
        "clientinformation.ipaddress": ips,
        "contenttype": "Data",
        "ibi": f"rep {LL8} ibip 8JMKD3MGP8W/35MMLL8",
        "state": "Original",
        "url": url,
        "url.persistent": f"{bed.url}/8JMKD3MGP8W/35MMLL8",
        "urlkey": ack["urlkey"],
    }
    assert URLKEY.fullmatch(ack["urlkey"])


def test_example_8_2_two_rounds(bed):
    user = "172.16.44.201"
    path = "/8JMKD3MGP8W/35MMLL8!:(oai_dc)"
    status, headers, _ = bed.get(path, user, **{"Accept-Language": EXAMPLE_6_8_LANGUAGES})
    url = f"http://{bed.b.address}/col/{NEXT_METADATA}/doc/oai_dc.xml"
    assert (status, headers["Location"]) == (302, url)
    ips = f"{user} 127.0.0.1"
    verbs = "GetLastEdition GetMetadata(oai_dc)"
    questions = [
        {
            "servicesubject": "urlRequest",
            "clientinformation.ipaddress": ips,
            "parsedibiurl.ibi": ibi,
            "parsedibiurl.verblist": verbs,
        }
        for ibi in ("8JMKD3MGP8W/35MMLL8", NEXT_EDITION)
    ]
    # Each round went to both Archives, or (issue 24), once examples 6.1 and 6.4 above have
    # resolved these IBIs, to the one that answered for it: A for the first, B for the next
    # edition.
    for archive, holds in ((bed.a, questions[0]), (bed.b, questions[1])):
        asked = wait_until(
            lambda archive=archive, holds=holds: holds in archive.asked_by(ips) and archive,
            what="the urlRequest in the log",
        ).asked_by(ips)
        assert asked in (questions, [holds])
    ((ack, ack_status),) = wait_until(lambda: bed.b.acks_from(user), what="the acknowledgment")
    assert bed.a.acks_from(user) == []
    assert ack_status == 200
    assert ack == {
        "servicesubject": "acknowledgment",
        "clientinformation.ipaddress": ips,
        "contenttype": "Metadata",
        "ibi": f"rep {NEXT_METADATA}",
        "state": "Original",
        "url": url,
        "url.persistent": bed.url + path,
        "urlkey": ack["urlkey"],
    }


def test_urlkeys_are_fresh_and_every_acknowledgment_was_accepted(bed):
    acks = bed.a.received("acknowledgment") + bed.b.received("acknowledgment")
    assert len(acks) >= len(EXAMPLES) + 2
    assert all(status == 200 and URLKEY.fullmatch(q["urlkey"]) for q, status in acks)
    keys = [q["urlkey"] for q, _ in acks]
    assert len(set(keys)) == len(keys)


def test_original_claims(bed):
    user = "10.8.0.1"
    status, _, body = bed.get(f"/{DOUBLE}?ibiurl.requireditemstatus=Original", user)
    assert status == 409
    page = body.decode()
    assert "Archives under suspicion" in page and "investigation" in page
    for archive in (bed.a, bed.b):
        assert f"{archive.address} (service {archive.service})" in page
        assert archive.acks_from(user) == []
    status, _, body = bed.get(f"/{COPY_ONLY}?ibiurl.requireditemstatus=Original", user)
    assert status == 404 and "no Archive claims to hold the Original" in body.decode()
    # A single Original claim next to a Copy is selected.
    status, headers, _ = bed.get(
        "/8JMKD3MGP8W/35MME4E?ibiurl.requireditemstatus=Original", "10.8.0.2"
    )
    assert (status, urlsplit(headers["Location"]).netloc) == (302, bed.a.address)


def test_deleted_unknown_and_malformed(bed):
    status, _, body = bed.get(f"/{DELETED}", "10.9.0.1")
    assert status == 404
    assert f"{DELETED} was removed on 2015-03-02T09:15:00Z" in body.decode()
    status, _, body = bed.get("/8JMKD3MGP8W/35MMLL9", "10.9.0.1")
    assert status == 404 and "not known to any of the 2 included Archives" in body.decode()
    status, _, body = bed.get("/8JMKD3MGP8W/35MMLL8!!", "10.9.0.1")
    assert status == 400 and "is not one of Table 6.2" in body.decode()
    for archive in (bed.a, bed.b):
        assert archive.acks_from("10.9.0.1") == []


def test_privacy_rule_in_what_the_archives_received(bed):
    asked = bed.a.received("urlRequest") + bed.b.received("urlRequest")
    assert len(asked) > 2 * len(EXAMPLES)
    allowed = {
        "servicesubject",
        "clientinformation.ipaddress",
        "parsedibiurl.ibi",
        "parsedibiurl.filepath",
        "parsedibiurl.verblist",
    }
    for query, status in asked:
        assert status == 200
        assert set(query) <= allowed, query
        assert "Original" not in query.values()
    # A language reaches an Archive only when the persistent URL names it (+(pt)), never from
    # the browser's Accept-Language.
    languages = {
        q["parsedibiurl.verblist"]
        for q, _ in asked
        if "GetTranslation(" in q.get("parsedibiurl.verblist", "")
    }
    assert languages == {"GetTranslation(pt)"}


def test_stopping_an_archive_excludes_it_until_it_returns(bed):
    old_address = bed.b.address
    bed.b.stop()  # SIGTERM; the exclusion follows
    try:
        status, _, body = bed.get("/8JMKD3MGP8W/35MMLL8!", "10.10.0.1")
        assert status == 404
        assert (
            f"{NEXT_EDITION} (reached from 8JMKD3MGP8W/35MMLL8) is not known to any of the "
            "1 included Archives"
        ) in body.decode()
        status, headers, _ = bed.get("/8JMKD3MGP8W/35MME4E", "10.10.0.2")
        assert (status, urlsplit(headers["Location"]).netloc) == (302, bed.a.address)
        # The resolver did not try the stopped Archive: a refused connection would be logged
        # as "Archive <address> (service …): no answer …".
        assert f"Archive {old_address} (service" not in bed.resolver.text()
    finally:
        bed.b.start()  # back, at a new address, with the same registration
    status, headers, _ = bed.get("/8JMKD3MGP8W/35MMLL8!", "10.10.0.3")
    assert (status, headers["Location"]) == (
        302,
        f"http://{bed.b.address}/col/{NEXT_EDITION}/doc/CCSDS%20650.0-M-2.pdf",
    )


def test_registration_keys_never_reach_a_log(bed):
    for log in (bed.resolver.log, bed.a.log, bed.b.log):
        text = log.read_text(errors="replace")
        assert KEY_A not in text and KEY_B not in text, log.name
    assert "registrationkey=<secret>" in bed.resolver.text()
