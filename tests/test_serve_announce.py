"""The real `archive-service serve` (gunicorn, 2 workers) joining and leaving a real loopback
resolver double: once per start, never held hostage by the resolver, the key never logged."""

from __future__ import annotations

import os
import signal
import time

import pytest

from resolver_double import ResolverDouble
from serve_process import ANNOUNCING, SAMPLE, SERVICE, Serve, free_port

pytestmark = pytest.mark.process

KEY = "5550001234-9990004321"
STOP_WITHIN = 15  # seconds: idle sync workers stop at once, plus exclusion_timeout and margin


@pytest.fixture
def resolver():
    double = ResolverDouble().start()
    yield double
    double.stop()


@pytest.fixture
def serving(tmp_path):
    started: list[Serve] = []

    def start(*args: str, **options) -> Serve:
        serve = Serve(tmp_path, *args, **options)
        started.append(serve)
        return serve

    yield start
    for serve in started:
        serve.kill()


def assert_key_never_logged(serve: Serve) -> None:
    log = serve.log()
    assert KEY not in log and KEY.replace("-", "") not in log
    assert "registrationkey=<secret>" in log or "registrationkey=" not in log


def test_joins_once_per_start_and_leaves_on_sigterm(tmp_path, resolver, serving):
    key_file = tmp_path / "registrationkey"
    key_file.write_text(KEY + "\n")
    key_file.chmod(0o600)
    serve = serving(
        "--resolver", resolver.url, "--registrationkey-file", str(key_file), *ANNOUNCING
    )
    [inclusion] = resolver.wait_for(1, "inclusionRequest")
    assert inclusion.pairs == {
        "servicesubject": "inclusionRequest",
        "archiveaddress": serve.address,
        "archiveserviceibi": SERVICE,
        "archiveip": "127.0.0.1",
        "archiveprotocol": "HTTP",
        "archiveplatformversion": inclusion.pairs["archiveplatformversion"],
        "archiveadmemailaddress": "admin@example.org",
        "registrationkey": KEY,
    }
    assert inclusion.pairs["archiveplatformversion"].startswith("archive-service-")
    assert inclusion.confirmation == "confirmation yes"
    serve.wait_log("status.archive included status.confirmation successful")

    # A worker that dies is replaced by gunicorn; that is not a new start of the service.
    # Children of the master come and go for a moment (a process forked but not yet exec'd
    # shows the master's command line): wait for the steady two workers.
    deadline = time.monotonic() + 10
    while len(workers := serve.workers()) != 2 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert len(workers) == 2, workers
    os.kill(workers[0], signal.SIGKILL)
    serve.wait_log("Booting worker with pid", count=3)
    for _ in range(6):
        assert serve.get() == "confirmation yes"
    assert resolver.subjects() == ["inclusionRequest"]

    assert serve.stop(STOP_WITHIN) == 0
    assert resolver.subjects() == ["inclusionRequest", "exclusionRequest"]
    exclusion = resolver.received[1].pairs
    assert exclusion == {**inclusion.pairs, "servicesubject": "exclusionRequest"}
    assert "status.archive excluded" in serve.log()
    assert_key_never_logged(serve)


def test_sigint_also_leaves(resolver, serving):
    serve = serving(
        "--resolver", resolver.url, *ANNOUNCING, env={"ARCHIVE_SERVICE_REGISTRATIONKEY": KEY}
    )
    resolver.wait_for(1, "inclusionRequest")
    serve.signal(signal.SIGINT)
    assert serve.stop(STOP_WITHIN) == 0
    assert resolver.subjects() == ["inclusionRequest", "exclusionRequest"]
    assert_key_never_logged(serve)


@pytest.mark.parametrize(
    "mode, complaint",
    [
        ("down", "could not be reached"),
        ("fail 1000", "HTTP 503"),
        ("garbage", "not a list of pairs"),
    ],
)
@pytest.mark.slow
def test_a_missing_or_wrong_resolver_never_holds_the_archive(resolver, serving, mode, complaint):
    if mode == "down":
        url = f"http://127.0.0.1:{free_port()}/J8LNKB5R7W/3FUQHC5"  # nobody listens there
    else:
        resolver.mode, url = mode, resolver.url
    serve = serving("--resolver", url, *ANNOUNCING, env={"ARCHIVE_SERVICE_REGISTRATIONKEY": KEY})
    serve.wait_answering()
    serve.wait_log("inclusion not done, next try in")
    assert complaint in serve.log()
    # While the inclusion is retried, the Archive serves.
    assert serve.get() == "confirmation yes"
    answer = serve.get(
        "servicesubject=urlRequest&clientinformation.ipaddress=127.0.0.1"
        "&parsedibiurl.ibi=LK47B6W/362SFKH"
    )
    assert "urlkey" in answer
    assert serve.stop(STOP_WITHIN) == 0
    assert "the resolver was not told that this Archive left" in serve.log()
    assert_key_never_logged(serve)


def test_a_resolver_that_does_not_answer_is_left_after_exclusion_timeout(resolver, serving):
    resolver.delay = 60  # accepts the connection, never answers in time
    serve = serving(
        "--resolver", resolver.url, *ANNOUNCING, env={"ARCHIVE_SERVICE_REGISTRATIONKEY": KEY}
    )
    serve.wait_answering()
    resolver.wait_for(1, "inclusionRequest", answered=False)  # it hangs; the service answers
    assert serve.get() == "confirmation yes"
    assert serve.stop(STOP_WITHIN) == 0
    assert resolver.subjects() == ["inclusionRequest", "exclusionRequest"]
    assert "did not answer the exclusionRequest within 2 s (exclusion_timeout)" in serve.log()
    assert_key_never_logged(serve)


@pytest.mark.slow
def test_sighup_re_announces_only_when_the_pairs_change(tmp_path, resolver, serving):
    config = tmp_path / "archive-service.yaml"

    def write(email: str) -> None:
        config.write_text(
            f"collection: {SAMPLE}\narchiveserviceibi: {SERVICE}\n"
            f"resolver: {resolver.url}\narchiveip: 127.0.0.1\n"
            f"archiveadmemailaddress: {email}\nexclusion_timeout: 2\n"
        )

    write("old@example.org")
    serve = serving(config=config, env={"ARCHIVE_SERVICE_REGISTRATIONKEY": KEY})
    resolver.wait_for(1, "inclusionRequest")

    serve.signal(signal.SIGHUP)  # nothing announced changed: stay included
    serve.wait_log("the announced pairs are unchanged, staying included")
    config.write_text("collection: [not, a, path\n")
    serve.signal(signal.SIGHUP)  # a broken edit: keep serving what runs
    serve.wait_log("reload: still serving the previous settings: config file")
    assert serve.get() == "confirmation yes"

    write("new@example.org")
    serve.signal(signal.SIGHUP)
    resolver.wait_for(2, "inclusionRequest")
    assert serve.stop(STOP_WITHIN) == 0
    assert [(r.subject, r.pairs["archiveadmemailaddress"]) for r in resolver.received] == [
        ("inclusionRequest", "old@example.org"),
        ("exclusionRequest", "old@example.org"),
        ("inclusionRequest", "new@example.org"),
        ("exclusionRequest", "new@example.org"),
    ]
    assert all(
        r.confirmation == "confirmation yes"
        for r in resolver.received
        if r.subject == "inclusionRequest"
    )
    assert_key_never_logged(serve)


def test_no_announce_and_resolver_none_send_nothing(resolver, serving):
    serve = serving("--no-announce", "--resolver", resolver.url)  # no key, no archiveip: fine
    serve.wait_answering()
    serve.wait_log("not announcing to any resolver (resolver: none)")
    assert serve.stop(STOP_WITHIN) == 0
    assert resolver.subjects() == []
