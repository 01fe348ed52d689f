"""The reference resolver's registry in PostgreSQL (the resolver's `database` setting): the
same registry as the SQLite file, and several `resolver serve` instances sharing it, so an
inclusion or exclusion done through one is what the other resolves by."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from archive_service.resolver.registry import Refused, Registry
from serve_process import ANNOUNCING, ROOT, SERVICE, Process, Serve, free_port, http_get

KEY = "5550001234-9990004321"
OTHER = "sid.inpe.br/mtc-m21/2012/06.05.15.34.39"
RESOLVER_IBI = "J8LNKB5R7W/3FUQHC5"
E4E_TARGET = "/col/sid.inpe.br/mtc-m18@80/2009/07.21.13.23/doc/CCSDS%20643.0-B-1.pdf"


def _message(subject: str, key: str = KEY, address: str = "127.0.0.1:9") -> dict[str, str]:
    return {
        "servicesubject": subject,
        "archiveaddress": address,
        "archiveserviceibi": SERVICE,
        "archiveip": "127.0.0.1",
        "archiveprotocol": "HTTP",
        "archiveplatformversion": "test",
        "archiveadmemailaddress": "admin@example.org",
        "registrationkey": key,
    }


def test_the_registry_in_postgresql(database_url, tmp_path):
    one = Registry(tmp_path / "unused-a", database_url)
    other = Registry(tmp_path / "unused-b", database_url)  # a second resolver instance
    assert one.register(OTHER, "1234567890") is True
    assert one.register(SERVICE, KEY) is True
    assert other.register(SERVICE, KEY) is False  # the same registry: re-keyed
    assert other.check_key(SERVICE.upper(), KEY) and not other.check_key(SERVICE, "1111111111")
    assert [r.serviceibi for r in other.records()] == [OTHER, SERVICE]  # registration order

    assert one.handle(_message("inclusionRequest"), confirm=lambda ref: True) == [
        ("status.archive", "included"),
        ("status.confirmation", "successful"),
    ]
    assert [(r.address, r.serviceibi) for r in other.included()] == [("127.0.0.1:9", SERVICE)]
    with pytest.raises(Refused):
        other.handle(_message("exclusionRequest", key="1111111111"), confirm=lambda ref: True)
    assert other.handle(_message("exclusionRequest"), confirm=lambda ref: True) == [
        ("status.archive", "excluded")
    ]
    assert one.included() == []
    assert not (tmp_path / "unused-a").exists()  # nothing of it in a state directory
    assert "postgresql://" in one.where and str(tmp_path) not in one.where


def test_an_archiveip_announced_anew_reaches_every_instance(database_url, tmp_path):
    """The included Archives an instance keeps are read again when the registry's `version`
    changes; in PostgreSQL it summed their IBIs and addresses only, so a new `archiveip` at
    the same address (the IBIps it names, resolve.py `covers`) never reached the others."""
    one = Registry(tmp_path / "unused-a", database_url)
    other = Registry(tmp_path / "unused-b", database_url)
    one.register(SERVICE, KEY)
    one.handle(_message("inclusionRequest"), confirm=lambda ref: True)
    assert [r.ip for r in other.included()] == ["127.0.0.1"]
    moved = {**_message("inclusionRequest"), "archiveip": "150.163.34.243"}
    one.handle(moved, confirm=lambda ref: True)
    assert [r.ip for r in other.included()] == ["150.163.34.243"]


def test_a_restart_a_day_after_the_last_is_seen_by_every_instance(database_url, tmp_path):
    """The registry's `version` summed the included Archives only: excluded again (a restart)
    after an inclusion, the registry read as it did at the exclusion before, so an instance
    that had read it then kept that exclusion's time, a day old, and took the owner for one
    away past its grace (`registry.EXCLUDED_GRACE`): its IBIs went to whoever claimed them
    (the twelfth adversarial pass)."""
    import psycopg

    from archive_service.protocol import ibi as ibimod

    one = Registry(tmp_path / "unused-a", database_url)
    other = Registry(tmp_path / "unused-b", database_url)
    one.register(SERVICE, KEY)
    one.handle(_message("inclusionRequest"), confirm=lambda ref: True)
    one.handle(_message("exclusionRequest"), confirm=lambda ref: True)
    with psycopg.connect(database_url, autocommit=True) as conn:  # that stop was yesterday
        conn.execute("UPDATE resolver_archive SET since = '2000-01-01T00:00:00Z'")
    key = ibimod.key(SERVICE)
    assert not other.lately_excluded(key)
    one.handle(_message("inclusionRequest"), confirm=lambda ref: True)
    one.handle(_message("exclusionRequest"), confirm=lambda ref: True)  # today's restart
    assert other.lately_excluded(key)


def test_the_networks_an_archive_sends_from_reach_every_instance(database_url, tmp_path):
    """`resolver register --from` on one node while another serves: the registry's `version`
    must move, or the other node keeps holding the Archive's first inclusion behind the
    all-sources bucket that a flood of wrong keys keeps empty (the thirteenth pass)."""
    from archive_service.resolver.registry import ANY_SOURCE, Throttled

    one = Registry(tmp_path / "unused-a", database_url)
    other = Registry(tmp_path / "unused-b", database_url)
    one.register(SERVICE, KEY)
    while not other.everyone.take(ANY_SOURCE):  # the flood's doing
        pass
    inclusion = _message("inclusionRequest")
    with pytest.raises(Throttled):
        other.handle(inclusion, confirm=lambda ref: True, source="192.0.2.7")
    one.register(SERVICE, KEY, ("192.0.2.0/24",))
    answer = other.handle(inclusion, confirm=lambda ref: True, source="192.0.2.7")
    assert ("status.archive", "included") in answer


def test_a_registry_database_that_does_not_answer_is_one_line(tmp_path):
    done = subprocess.run(
        [sys.executable, "-m", "archive_service.cli", "resolver", "list"]
        + ["--state-dir", str(tmp_path), "--database", "postgresql://nobody@127.0.0.1:1/none"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode != 0 and "cannot connect" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr


class Resolver:
    def __init__(self, base: Path, name: str, database: str):
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.url = f"{self.base}/{RESOLVER_IBI}"
        self.process = Process(
            ["resolver", "serve", "--state-dir", str(base / f"state-{name}")]
            + ["--database", database, "--bind", f"127.0.0.1:{self.port}", "--timeout", "3"],
            base / f"resolver-{name}.log",
        ).start()

    def resolve(self, path: str):
        return http_get(self.base + path, {"X-Forwarded-For": "10.8.0.1"})


@pytest.mark.process
@pytest.mark.slow
def test_two_resolver_instances_share_one_registry(tmp_path, database_url):
    registered = subprocess.run(
        [sys.executable, "-m", "archive_service.cli", "resolver", "register"]
        + ["--state-dir", str(tmp_path / "cli"), "--database", database_url]
        + ["--serviceibi", SERVICE, "--key", KEY],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert registered.returncode == 0, registered.stderr
    one, two = Resolver(tmp_path, "one", database_url), Resolver(tmp_path, "two", database_url)
    archive = None
    try:
        for resolver in (one, two):
            resolver.process.wait_answering(resolver.base + "/")
        # The Archive joins through the first resolver (SQLite for itself: database is the
        # resolver's here) …
        archive = Serve(
            tmp_path,
            "--state-dir",
            str(tmp_path / "archive-state"),
            "--resolver",
            one.url,
            "--workers",
            "1",
            *ANNOUNCING,
            env={"ARCHIVE_SERVICE_REGISTRATIONKEY": KEY},
        )
        archive.wait_log("status.archive included status.confirmation successful")
        # … and the second resolves to it.
        status, headers, body = two.resolve("/8JMKD3MGP8W/35MME4E")
        assert (status, headers["Location"]) == (
            302,
            f"http://{archive.address}{E4E_TARGET}",
        ), body
        # The exclusion reaches the first; the second then knows no Archive to ask.
        assert archive.stop() == 0
        assert "status.archive excluded" in archive.log()
        status, _, body = two.resolve("/8JMKD3MGP8W/35MME4E")
        assert status == 503 and b"No Archive available" in body, (status, body)
    finally:
        if archive is not None:
            archive.kill()
        for resolver in (one, two):
            resolver.process.kill()
