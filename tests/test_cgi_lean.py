"""contrib's CGI program answers the protocol without Flask (issue 35): a urlRequest, an
acknowledgment or an inclusionConfirmationRequest imports neither Flask, Jinja nor Werkzeug,
and its answer is the one the WSGI app gives, byte for byte, errors included (the urlkey's
nonce aside). Pages still go to the whole app (tests/test_contrib.py); files are sent
without Flask (tests/test_cgi_download.py)."""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import urlencode

import pytest
import webtest

from archive_service.protocol import pairs
from fronts import TARGET_IBI, indexed_for_cgi, run_cgi
from support import SERVICE, acknowledgment

URL_REQUEST = "servicesubject=urlRequest&clientinformation.ipaddress=127.0.0.1&parsedibiurl.ibi="
# prometheus_client too: a CGI process's counters die with it (docs/metrics.md), so its
# protocol path keeps none (web/cgi.py); /metrics goes to create_app's app.
FRAMEWORKS = ("flask", "jinja2", "werkzeug", "flask_babel", "prometheus_client")
QUERIES = {
    "inclusion": "servicesubject=inclusionConfirmationRequest",
    "urlRequest": URL_REQUEST + TARGET_IBI,
    "not held": URL_REQUEST + "8JMKD3MGP7W/NOTHERE1",
    "no client": "servicesubject=urlRequest&parsedibiurl.ibi=" + TARGET_IBI,
    "bad acknowledgment": "servicesubject=acknowledgment&clientinformation.ipaddress=127.0.0.1",
    "unknown subject": "servicesubject=nonsense",
    "too long": "servicesubject=urlRequest&x=" + "a" * 5000,
}


@pytest.fixture(scope="module")
def archive(tmp_path_factory) -> tuple[Path, webtest.TestApp]:
    """The sample's settings (state_dir of its own) with its index built, and the WSGI app
    create_app makes of them, as mod_wsgi and CGI make it (no walk)."""
    return indexed_for_cgi(tmp_path_factory.mktemp("cgi-lean"))


def through_cgi(config: Path, query: str, method: str = "GET") -> tuple[list[str], bytes]:
    """The CGI program's head lines and body; it fails the test if it imported a framework."""
    lines: list[str] = []
    head, body = run_cgi(f"/{SERVICE}", query, config, lines, method, ("-X", "importtime"))
    imported = {line.rsplit("|", 1)[1].strip() for line in lines if line.startswith("import time")}
    assert "archive_service.web.service" in imported  # the import times were read
    assert not imported & set(FRAMEWORKS), sorted(imported & set(FRAMEWORKS))
    return head.split("\r\n"), body


def same_answer(cgi: tuple[list[str], bytes], wsgi: webtest.TestResponse) -> None:
    head, body = cgi
    assert head == [f"Status: {wsgi.status}"] + [f"{k}: {v}" for k, v in wsgi.headerlist]
    # Each urlRequest's urlkey has a nonce of its own: equal in length, not in digits.
    unkeyed = re.compile(rb"^urlkey [0-9-]+\r?$", re.M)
    assert unkeyed.sub(b"urlkey *", body) == unkeyed.sub(b"urlkey *", wsgi.body)


@pytest.mark.process
@pytest.mark.parametrize("query", QUERIES.values(), ids=QUERIES.keys())
def test_a_protocol_request_is_the_wsgi_answer_without_flask(archive, query):
    config, app = archive
    wsgi = app.get(f"/{SERVICE}?{query}", expect_errors=True)
    assert wsgi.status_int in (200, 400)
    same_answer(through_cgi(config, query), wsgi)


@pytest.mark.process
def test_an_acknowledgment_and_a_head_are_the_wsgi_answers_without_flask(archive):
    config, app = archive
    got = dict(pairs.parse(app.get(f"/{SERVICE}?{URL_REQUEST}{TARGET_IBI}").text))
    query = urlencode(acknowledgment(got))
    wsgi = app.get(f"/{SERVICE}?{query}")
    assert wsgi.text == "notice {acknowledgment received}"
    same_answer(through_cgi(config, query), wsgi)
    head = app.head(f"/{SERVICE}?{URL_REQUEST}{TARGET_IBI}")
    same_answer(through_cgi(config, URL_REQUEST + TARGET_IBI, "HEAD"), head)
