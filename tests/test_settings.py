"""Settings: one table; CLI > environment > YAML file > defaults; one clear line when wrong."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from archive_service import settings
from archive_service.cli import build_parser, main

ROOT = Path(__file__).resolve().parent.parent


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "archive-service.yaml"
    path.write_text(text)
    path.chmod(0o600)  # a key in a file others can read is warned about; not the point here
    return path


def test_precedence_command_line_then_environment_then_file_then_default(tmp_path):
    path = write(tmp_path, "archiveaddress: file.example.org\nworkers: 3\nbind: 127.0.0.1:9000\n")
    env = {"ARCHIVE_SERVICE_ARCHIVEADDRESS": "env.example.org", "ARCHIVE_SERVICE_WORKERS": "4"}
    config = settings.load(str(path), {"archiveaddress": "cli.example.org"}, env)
    assert config.archiveaddress == "cli.example.org"
    assert config.workers == 4
    assert config.bind == "127.0.0.1:9000"
    assert config.resolver == settings.DEFAULT_RESOLVER
    assert config.sources["workers"] == "environment ARCHIVE_SERVICE_WORKERS"


def test_relative_paths_in_the_file_are_relative_to_the_file(tmp_path):
    path = write(tmp_path, "collection: col\n")
    assert settings.load(str(path), {}, {}).collection == str(tmp_path / "col")


def test_unknown_keys_warn(tmp_path):
    path = write(tmp_path, "archiveaddres: typo.example.org\n")
    with pytest.warns(settings.ConfigWarning, match="unknown setting 'archiveaddres'"):
        settings.load(str(path), {}, {})


@pytest.mark.parametrize(
    "text, message",
    [
        ("archiveaddress: [a\n", "line 2"),
        ("- a\n- b\n", "must be a map"),
        ("archiveaddress: http://x.org/\n", "setting archiveaddress"),
        ("archiveserviceibi: not-an-ibi\n", "setting archiveserviceibi"),
        ("workers: 0\n", "setting workers"),
        ("resolver: ftp://x\n", "setting resolver"),
        ("registrationkey: 123\n", "setting registrationkey = <secret>"),
    ],
)
def test_a_bad_file_stops_with_one_line_naming_the_key(tmp_path, text, message):
    path = write(tmp_path, text)
    with pytest.raises(settings.ConfigError) as caught:
        settings.load(str(path), {}, {})
    assert message in str(caught.value) and "\n" not in str(caught.value)


def test_missing_required_setting_names_how_to_give_it():
    config = settings.load(None, {}, {})
    with pytest.raises(
        settings.ConfigError, match="--archiveaddress, ARCHIVE_SERVICE_ARCHIVEADDRESS"
    ):
        config.require("archiveaddress")


def test_missing_config_file_is_one_line(tmp_path):
    with pytest.raises(settings.ConfigError, match="No such file"):
        settings.load(str(tmp_path / "absent.yaml"), {}, {})


def test_secrets_are_redacted_and_not_shown_in_help(tmp_path, monkeypatch, capsys):
    key = "1234567890-1234567890"
    config = settings.load(None, {"registrationkey": key}, {})
    assert config.redacted()["registrationkey"] == "<secret>"
    # The key where an admin keeps it (the environment, the config file) when asking for help.
    monkeypatch.setenv("ARCHIVE_SERVICE_REGISTRATIONKEY", key)
    path = write(tmp_path, f"registrationkey: '{key}'\n")
    with pytest.raises(SystemExit):
        main(["serve", "--config", str(path), "--help"])
    shown = capsys.readouterr().out
    assert "--registrationkey" in shown  # the help that lists the key's option
    assert key not in shown


def test_state_dir_follows_systemd(tmp_path, monkeypatch):
    monkeypatch.delenv("STATE_DIRECTORY", raising=False)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    assert settings.load(None, {}, {}).state_dir == str(tmp_path / "data" / "archive-service")
    # systemd's StateDirectory= (the first, if it names several) comes before the data home…
    monkeypatch.setenv("STATE_DIRECTORY", f"{tmp_path / 'systemd'}:{tmp_path / 'other'}")
    assert settings.load(None, {}, {}).state_dir == str(tmp_path / "systemd")
    # …and a state_dir the admin gives before both.
    given = settings.load(None, {}, {"ARCHIVE_SERVICE_STATE_DIR": str(tmp_path / "given")})
    assert given.state_dir == str(tmp_path / "given")


def test_every_setting_is_documented_in_the_readme_and_in_help():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    serve_help = build_parser()._subparsers._group_actions[0].choices["serve"].format_help()
    for setting in settings.SETTINGS:
        assert re.search(rf"`{setting.name}`", readme), f"README does not document {setting.name}"
        assert setting.env in readme, f"README does not name {setting.env}"
        assert setting.option in serve_help


def test_an_ipv4_mapped_network_is_kept_as_the_ipv4_one_it_names():
    """`::ffff:a.b.c.d` in trusted_proxies or resolver_networks matched no client, whose
    address is compared as IPv4 (the adversarial pass over issue 30)."""
    assert settings.networks("::ffff:192.0.2.7, ::ffff:198.51.100.0/120, 2001:db8::/32") == (
        "192.0.2.7/32",
        "198.51.100.0/24",
        "2001:db8::/32",
    )
