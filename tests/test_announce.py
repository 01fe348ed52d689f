"""Inclusion/exclusion messages (SPEC §5), their encoding (§3), the settings they need, and the
client side against a real loopback resolver double."""

from __future__ import annotations

import logging
import os
import socketserver
import threading
import warnings
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from urllib.parse import parse_qsl, urlsplit

import pytest
import webtest
from hypothesis import given
from hypothesis import strategies as st

from archive_service import cli, settings
from archive_service.serve import announce, announcer
from archive_service.web import create_app
from resolver_double import KEY, SERVICE, ResolverDouble, loopback_announcement

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "sample_collection"

# The seed's Example 5.2 (inclusion) and 5.3 (exclusion), joined into one line each.
SEED_TAIL = (
    "&archiveaddress=mtc-m21.sid.inpe.br&archiveserviceibi=sid.inpe.br/mtc-m21/2012/"
    "06.05.15.34.39&archiveip=150.163.34.239&archiveprotocol=HTTP&archiveplatformversion="
    "2014:11.09.02.16.15&archiveadmemailaddress=banon@dpi.inpe.br&registrationkey=1234567890"
)
SEED_RESOLVER = "http://www.urlib.net/J8LNKB5R7W/3FUQHC5"


def seed_announcement(**changes) -> announce.Announcement:
    values = dict(
        archiveaddress="mtc-m21.sid.inpe.br",
        archiveserviceibi="sid.inpe.br/mtc-m21/2012/06.05.15.34.39",
        archiveip="150.163.34.239",
        archiveplatformversion="2014:11.09.02.16.15",
        archiveadmemailaddress="banon@dpi.inpe.br",
        registrationkey="1234567890",
    )
    values.update(changes)
    return announce.Announcement.build(SEED_RESOLVER, **values)


def config(**options) -> settings.Config:
    base = dict(
        collection=str(SAMPLE),
        archiveaddress="archive.example.org",
        archiveserviceibi=SERVICE,
        archiveip="192.0.2.7",
        archiveadmemailaddress="admin@example.org",
        registrationkey=KEY,
        resolver="http://resolver.example.org/J8LNKB5R7W/3FUQHC5",
    )
    base.update(options)
    return settings.load(options={k: v for k, v in base.items() if v is not None}, environ={})


# ---------------------------------------------------------------------------- messages


def test_inclusion_and_exclusion_urls_are_the_seeds_examples():
    announcement = seed_announcement()
    assert announcement.url("inclusionRequest") == (
        SEED_RESOLVER + "?servicesubject=inclusionRequest" + SEED_TAIL
    )
    assert announcement.url("exclusionRequest") == (
        SEED_RESOLVER + "?servicesubject=exclusionRequest" + SEED_TAIL
    )


def test_the_eight_pairs_of_table_5_2():
    query = urlsplit(seed_announcement().url("inclusionRequest")).query
    names = [name for name, _ in parse_qsl(query)]
    assert names == [
        "servicesubject",
        "archiveaddress",
        "archiveserviceibi",
        "archiveip",
        "archiveprotocol",
        "archiveplatformversion",
        "archiveadmemailaddress",
        "registrationkey",
    ]
    assert dict(parse_qsl(query))["archiveprotocol"] == "HTTP"


@pytest.mark.parametrize(
    "char, escaped",
    [
        (" ", "%20"),
        ("%", "%25"),
        ("&", "%26"),
        ("+", "%2B"),
        ("=", "%3D"),
        ("?", "%3F"),
        ("#", "%23"),
        ("é", "%C3%A9"),
    ],
)
def test_values_are_escaped_as_section_3_says(char, escaped):
    assert announce.encode(f"a{char}b") == f"a{escaped}b"
    url = seed_announcement(archiveplatformversion=f"v{char}1").url("inclusionRequest")
    assert f"archiveplatformversion=v{escaped}1&" in url


def test_ibi_address_and_email_characters_stay_as_in_the_seed():
    assert (
        announce.encode("sid.inpe.br/mtc-m18@80/2008/03.17.15.17")
        == "sid.inpe.br/mtc-m18@80/2008/03.17.15.17"
    )
    assert announce.encode("[2001:db8::1]:8080") == "[2001:db8::1]:8080"


@given(st.text(st.characters(blacklist_categories=("Cs",)), min_size=1))
def test_any_value_comes_back_whole_from_the_query(value):
    announcement = seed_announcement(archiveplatformversion=value)
    query = urlsplit(announcement.url("exclusionRequest")).query
    assert "#" not in query and " " not in query and query.isascii()
    decoded = dict(parse_qsl(query, keep_blank_values=True))
    assert decoded["archiveplatformversion"] == value
    assert len(query.split("&")) == 8


def test_redact_removes_the_key_from_urls_and_text():
    announcement = seed_announcement(registrationkey=KEY)
    url = announcement.url("inclusionRequest")
    assert KEY in url
    shown = announcement.redact(url + f" and the resolver said {KEY}")
    assert KEY not in shown and "registrationkey=<secret>" in shown


def test_same_message_ignores_only_the_exclusion_timeout():
    a = seed_announcement()
    assert a.same_message(announce.Announcement(a.resolver, a.pairs, 30.0))
    assert not a.same_message(seed_announcement(archiveadmemailaddress="other@dpi.inpe.br"))
    assert not a.same_message(None)


def test_backoff_doubles_with_jitter_and_stays_bounded():
    delays = [announce.backoff(n, 1.0) for n in range(40)]
    assert all(0.5 <= d <= announce.MAX_RETRY for d in delays)
    assert max(delays[:3]) <= 4 and min(delays[20:]) >= announce.MAX_RETRY / 2
    assert len({announce.backoff(3, 1.0) for _ in range(20)}) > 1  # jitter


# ---------------------------------------------------------------------------- settings


def test_resolver_none_needs_no_announcing_settings():
    plain = config(
        resolver="none", archiveip=None, archiveadmemailaddress=None, registrationkey=None
    )
    assert announce.from_config(plain, environ={}) is None


def test_without_a_registration_key_nothing_is_announced():
    # Issue 18: the Archive serves, joined to no resolver; Lifecycle says so once.
    assert announce.from_config(config(registrationkey=None), environ={}) is None
    assert "registrationkey_file" in announce.silence(config(registrationkey=None))


@pytest.mark.parametrize("missing", ["archiveip", "archiveadmemailaddress"])
def test_a_missing_announcing_setting_is_one_line_naming_it(missing):
    with pytest.raises(settings.ConfigError) as error:
        announce.from_config(config(**{missing: None}), environ={})
    message = str(error.value)
    assert f"setting {missing} is missing" in message and "\n" not in message
    assert "--no-announce" in message


def test_the_announcement_carries_the_configured_pairs():
    announcement = announce.from_config(config(exclusion_timeout="2.5"), environ={})
    assert dict(announcement.pairs) == {
        "archiveaddress": "archive.example.org",
        "archiveserviceibi": SERVICE,
        "archiveip": "192.0.2.7",
        "archiveprotocol": "HTTP",
        "archiveplatformversion": settings.BY_NAME["archiveplatformversion"].default,
        "archiveadmemailaddress": "admin@example.org",
        "registrationkey": KEY,
    }
    assert announcement.exclusion_timeout == 2.5


@pytest.mark.parametrize("bad", ["0", "-1", "soon", "4000"])
def test_exclusion_timeout_must_be_a_sensible_number_of_seconds(bad):
    with pytest.raises(settings.ConfigError, match="exclusion_timeout"):
        config(exclusion_timeout=bad)


def private_file(path: Path, text: str) -> Path:
    path.write_text(text)
    path.chmod(0o600)
    return path


def test_key_from_a_file(tmp_path):
    key_file = private_file(tmp_path / "key", KEY + "\n")
    announcement = announce.from_config(
        config(registrationkey=None, registrationkey_file=str(key_file)), environ={}
    )
    assert announcement.value("registrationkey") == KEY


def test_key_from_systemd_credentials(tmp_path):
    private_file(tmp_path / "registrationkey", KEY)
    announcement = announce.from_config(
        config(registrationkey=None), environ={"CREDENTIALS_DIRECTORY": str(tmp_path)}
    )
    assert announcement.value("registrationkey") == KEY


@pytest.mark.parametrize("content", ["", "\n", "  \n"])
def test_an_empty_systemd_credential_means_not_joined(tmp_path, content):
    """contrib/systemd's way to run the unit before a key is had: LoadCredential= needs the
    file, left empty (issue 34, point 9; it was a settings error, exit 2)."""
    private_file(tmp_path / "registrationkey", content)
    environ = {"CREDENTIALS_DIRECTORY": str(tmp_path)}
    assert announce.from_config(config(registrationkey=None), environ=environ) is None
    problems: list[str] = []
    announce.from_config(config(registrationkey=None), environ=environ, problems=problems)
    assert problems == []


def test_the_units_documentation_is_installed_by_a_step_of_the_readme():
    contrib = Path(__file__).resolve().parent.parent / "contrib" / "systemd"
    steps = (contrib / "README.md").read_text()
    for unit in contrib.glob("*.service"):
        for line in unit.read_text().splitlines():
            if line.startswith("Documentation="):
                for url in line.split("=", 1)[1].split():
                    assert url.startswith("file://"), url
                    assert f" {url.removeprefix('file://')}\n" in steps, (unit.name, url)


def test_key_file_problems_are_one_line_without_the_content(tmp_path):
    wrong = private_file(tmp_path / "key", "12345 not a key 1234567890123")
    with pytest.raises(settings.ConfigError) as error:
        announce.from_config(
            config(registrationkey=None, registrationkey_file=str(wrong)), environ={}
        )
    assert "registrationkey_file" in str(error.value) and "1234567890123" not in str(error.value)
    with pytest.raises(settings.ConfigError, match="cannot read it"):
        announce.from_config(
            config(registrationkey=None, registrationkey_file=str(tmp_path / "absent")), environ={}
        )
    with pytest.raises(settings.ConfigError, match="both given"):
        announce.from_config(config(registrationkey_file=str(wrong)), environ={})


def test_a_key_file_everyone_can_read_warns(tmp_path):
    key_file = tmp_path / "key"
    key_file.write_text(KEY)
    key_file.chmod(0o644)
    with pytest.warns(settings.ConfigWarning, match="every user"):
        announce.from_config(
            config(registrationkey=None, registrationkey_file=str(key_file)), environ={}
        )


def test_a_config_file_with_the_key_that_everyone_can_read_warns(tmp_path):
    config_file = tmp_path / "archive-service.yaml"
    config_file.write_text(f"registrationkey: '{KEY}'\n")
    config_file.chmod(0o644)
    with pytest.warns(settings.ConfigWarning, match="holds registrationkey") as record:
        settings.load(config_file, environ={})
    assert all(KEY not in str(w.message) for w in record)
    config_file.chmod(0o640)  # group-readable is how the service user reads it: no warning
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert settings.load(config_file, environ={}).registrationkey == KEY


def test_serve_refuses_to_start_naming_the_missing_setting(tmp_path, capsys):
    code = cli.main(
        [
            "serve",
            "--config",
            str(SAMPLE / "archive-service.yaml"),
            "--resolver",
            "http://127.0.0.1:9/J8LNKB5R7W/3FUQHC5",
            "--archiveadmemailaddress",
            "admin@example.org",
            "--registrationkey",
            KEY,
        ]
    )
    assert code == 2
    err = capsys.readouterr().err.strip()
    assert "setting archiveip is missing" in err and len(err.splitlines()) == 1
    assert KEY not in err


def test_help_shows_no_key(capsys, monkeypatch):
    monkeypatch.setenv("ARCHIVE_SERVICE_REGISTRATIONKEY", KEY)
    with pytest.raises(SystemExit):
        cli.main(["serve", "--help"])
    out = capsys.readouterr().out
    assert KEY not in out and "--no-announce" in out and "--exclusion-timeout" in out


def test_error_pages_show_no_key():
    app = webtest.TestApp(create_app(config()))
    for url, status in [
        (f"/{SERVICE}?servicesubject=nonsense", 400),
        (f"/{SERVICE}?registrationkey={KEY}", 400),
        ("/col/nothing/here", 404),
    ]:
        response = app.get(url, status=status, expect_errors=True)
        assert KEY not in response.text


# ---------------------------------------------------------------------- talking to the resolver


@pytest.fixture
def resolver():
    double = ResolverDouble().start()
    yield double
    double.stop()


def test_exclusion_is_logged_with_the_resolvers_status(resolver, caplog):
    caplog.set_level(logging.INFO, "archive_service.serve.announce")
    announce.exclude(loopback_announcement(resolver.url), 5)
    assert resolver.subjects() == ["exclusionRequest"]
    assert resolver.received[0].pairs["registrationkey"] == KEY
    assert "status.archive excluded" in caplog.text and KEY not in caplog.text


@pytest.mark.parametrize(
    "mode, complaint", [("garbage", "not a list of pairs"), ("fail 9", "HTTP 503")]
)
def test_wrong_answers_are_errors_that_name_the_problem(resolver, mode, complaint, caplog):
    resolver.mode = mode
    announcement = loopback_announcement(resolver.url)
    with pytest.raises(announce.ResolverError, match=complaint) as error:
        announce.include(announcement, timeout=5)
    assert KEY not in str(error.value) and "registrationkey=<secret>" in str(error.value)
    announce.exclude(announcement, 5)
    assert "the resolver was not told" in caplog.text and complaint in caplog.text
    assert KEY not in caplog.text


def test_an_absent_resolver_is_an_error_not_a_crash(caplog):
    with socketserver.TCPServer(("127.0.0.1", 0), BaseHTTPRequestHandler) as closed:
        url = f"http://127.0.0.1:{closed.server_address[1]}/J8LNKB5R7W/3FUQHC5"
    with pytest.raises(announce.ResolverError, match="could not be reached"):
        announce.include(loopback_announcement(url), timeout=2)


def test_exclusion_gives_up_after_its_timeout(resolver, caplog):
    answered = threading.Event()
    resolver.delay = 3.0
    original = resolver.reply
    resolver.reply = lambda *args: (original(*args), answered.set())
    announce.exclude_within(loopback_announcement(resolver.url), 0.3)
    assert not answered.is_set()  # we stopped waiting before the resolver answered
    assert "not answer the exclusionRequest within 0.3 s" in caplog.text


class ConfirmingService(BaseHTTPRequestHandler):
    """Answers inclusionConfirmationRequest like the Archive service (for the unix socket)."""

    def do_GET(self) -> None:
        body = b"confirmation yes"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def address_string(self) -> str:
        return "unix"

    def log_message(self, *args) -> None:
        pass


def test_service_answers_over_a_unix_socket(tmp_path):
    path = str(tmp_path / "s.sock")

    class UnixHTTPServer(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
        daemon_threads = True

    announcement = loopback_announcement("http://127.0.0.1:9/x")
    local = announcer.Local(path=path)
    assert not announcer.service_answers(announcement, local)
    with UnixHTTPServer(path, ConfirmingService) as server:
        threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
        assert announcer.Local.of_socket(server.socket) == local
        assert announcer.service_answers(announcement, local)
        server.shutdown()


def test_inclusion_waits_for_the_service_and_retries_the_resolver(resolver, caplog):
    """The real app on a loopback socket; the resolver fails twice, then includes us."""
    from wsgiref.simple_server import WSGIRequestHandler, make_server

    class Quiet(WSGIRequestHandler):
        def log_message(self, *args) -> None:
            pass

    caplog.set_level(logging.INFO, "archive_service")
    resolver.mode = "fail 2"
    with make_server("127.0.0.1", 0, create_app(config()), handler_class=Quiet) as service:
        address = f"127.0.0.1:{service.server_address[1]}"
        threading.Thread(target=service.serve_forever, args=(0.05,), daemon=True).start()
        announcement = loopback_announcement(resolver.url, address)
        local = announcer.Local("127.0.0.1", service.server_address[1])
        done = announcer.join_when_answering(
            announcement, local, parent=os.getppid(), first_retry=0.05
        )
        service.shutdown()
    assert done
    assert resolver.subjects() == ["inclusionRequest"] * 3
    assert resolver.received[-1].confirmation == "confirmation yes"
    assert caplog.text.count("inclusion not done, next try") == 2
    assert "status.archive included status.confirmation successful" in caplog.text
    assert KEY not in caplog.text


def test_an_unconfirmed_inclusion_warns_what_to_check(resolver, caplog):
    """The resolver cannot call the Archive back (nothing listens at archiveaddress)."""
    with socketserver.TCPServer(("127.0.0.1", 0), BaseHTTPRequestHandler) as closed:
        address = f"127.0.0.1:{closed.server_address[1]}"
    announcement = loopback_announcement(resolver.url, address)
    status = announce.include(announcement, timeout=10)
    announce.report_inclusion(announcement, status)
    [record] = [r for r in caplog.records if r.name == "archive_service.serve.announce"]
    assert record.levelname == "WARNING"
    assert "status.archive included status.confirmation unsuccessful" in record.getMessage()
    assert f"check that {address} is reachable" in record.getMessage()
    assert f"passes /{SERVICE} to this service" in record.getMessage()
