"""`archiveplatformversion` is an ASCII sequence (seed 000 Tab. 5.2, §4.1), blanks included:
`2014:11.09 build+1` is accepted by `serve`'s settings, sent as `2014:11.09%20build%2B1`,
and registered whole by the reference resolver's inclusionRequest (issue 34, point 8)."""

from __future__ import annotations

import pytest
import webtest

from archive_service import settings
from archive_service.resolver.app import create_resolver_app
from archive_service.resolver.registry import Registry
from archive_service.serve import announce
from resolver_support import KEY_A, RESOLVER_IBI, SERVICE_A

VERSION = "2014:11.09 build+1"


def test_a_version_with_a_blank_is_a_valid_setting():
    assert settings.ascii_text(VERSION) == VERSION


@pytest.mark.parametrize(
    "value, why",
    [("", "empty or blank"), ("   ", "empty or blank"), (" v1", "begin or end"),
     ("v1\t2", "printable ASCII"), ("versão", "printable ASCII"), ("v\x7f", "printable ASCII")],
)  # fmt: skip
def test_what_is_not_an_ascii_sequence_is_refused_with_its_reason(value, why):
    with pytest.raises(ValueError, match=why):
        settings.ascii_text(value)


def test_the_announcement_escapes_the_blank_and_the_plus():
    sent = announce.Announcement.build(
        "http://resolver.example/" + RESOLVER_IBI,
        archiveaddress="archive.example.org",
        archiveserviceibi=SERVICE_A,
        archiveip="192.0.2.7",
        archiveplatformversion=VERSION,
        archiveadmemailaddress="admin@example.org",
        registrationkey=KEY_A,
    )
    assert "&archiveplatformversion=2014:11.09%20build%2B1&" in sent.url("inclusionRequest")


def test_the_resolver_registers_the_version_whole(tmp_path):
    state = tmp_path / "state"
    Registry(state).register(SERVICE_A, KEY_A)
    resolver = webtest.TestApp(create_resolver_app({"state_dir": str(state)}))
    query = (
        "servicesubject=exclusionRequest&archiveaddress=127.0.0.1:9"
        f"&archiveserviceibi={SERVICE_A}&archiveip=127.0.0.1&archiveprotocol=HTTP"
        "&archiveplatformversion=2014:11.09%20build%2B1"
        f"&archiveadmemailaddress=admin@example.org&registrationkey={KEY_A}"
    )
    answer = resolver.get(f"/{RESOLVER_IBI}?{query}", status=200)
    assert "status.archive excluded" in answer.text
    inclusion = query.replace("exclusionRequest", "inclusionRequest")
    answer = resolver.get(f"/{RESOLVER_IBI}?{inclusion}", status=200)
    assert "status.archive included" in answer.text
    (record,) = Registry(state).records()
    assert record.platformversion == VERSION
