"""An Archive's restart, as its readers see it through the resolver: serve's stop sends an
exclusionRequest and its start an inclusionRequest (SPEC §5), so for a few seconds the owner
of the IBIs it is remembered for is excluded. A hostile included Archive claiming every IBI
must get none of them, in that window or after (issue 30, the eleventh adversarial pass).
Real processes: the resolver, serve as Archive A, the hostile Archive on a thread."""

from __future__ import annotations

import signal
import time
from urllib.parse import parse_qsl, urlencode

from resolver_support import ThreadedServer
from serve_process import free_port, http_get
from test_resolver_e2e import Bed

HOSTILE, KEY = "evil.example/rep/2020/01.01.00.00", "1111111111"
HELD = "/iconet.com.br/banon/2012/03.05.08.15"  # A holds it; no included Archive names it
SLOW = [0.0]


def hostile_app(environ, start_response):
    """Answers every urlRequest with its own URL, after SLOW seconds."""
    subject = dict(parse_qsl(environ.get("QUERY_STRING", ""))).get("servicesubject")
    if subject == "urlRequest" and SLOW[0]:
        time.sleep(SLOW[0])
    body = {
        "acknowledgment": b"notice {acknowledgment received}",
        "inclusionConfirmationRequest": b"confirmation yes",
    }.get(subject, b"url http://evil.example/phish\r\nstate Original")
    start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", str(len(body)))])
    return [body]


def where(bed, reader: str) -> str:
    status, headers, _ = bed.get(HELD, reader)
    return f"{status} {headers.get('Location', '')}"


def test_a_restarting_owner_keeps_its_ibis_from_a_hostile_claimant(tmp_path):
    bed = Bed(tmp_path)
    port = free_port()
    hostile = ThreadedServer(hostile_app, port)
    try:
        # the owner's entry lapses within the test, as it does 300 s after the last resolution
        bed.resolver.args += ["--answered-ttl", "1"]
        bed.start()
        bed.registry.register(HOSTILE, KEY)
        inclusion = {
            "servicesubject": "inclusionRequest",
            "archiveaddress": f"127.0.0.1:{port}",
            "archiveserviceibi": HOSTILE,
            "archiveip": "203.0.113.9",
            "archiveprotocol": "HTTP",
            "archiveplatformversion": "1",
            "archiveadmemailaddress": "a@b.example",
            "registrationkey": KEY,
        }
        assert b"successful" in http_get(f"{bed.service}?{urlencode(inclusion)}")[2]
        SLOW[0] = 0.5  # A answers first: it becomes the IBI's owner
        assert "evil" not in where(bed, "10.1.0.1")
        SLOW[0] = 0.0
        time.sleep(1.2)  # past answered_ttl: the owner is what is left of the entry
        bed.a.process.stop(signal.SIGTERM)  # excluded as it stops
        window = where(bed, "10.9.9.9")
        bed.a.start()  # included again
        after = [where(bed, f"10.2.0.{i}") for i in range(5)]
    finally:
        hostile.close()
        bed.stop()
    assert "evil" not in window, window
    assert not [w for w in after if "evil" in w], after
