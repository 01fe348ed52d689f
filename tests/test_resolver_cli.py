"""`archive-service resolver register|list|serve`: the contract commands and their settings."""

from __future__ import annotations

import io

import pytest

from archive_service import cli, settings
from archive_service.resolver import config as rconfig
from archive_service.resolver.registry import Registry
from resolver_support import KEY_A, SERVICE_A


def run(capsys, *argv) -> tuple[int, str, str]:
    try:
        code = cli.main(list(argv))
    except SystemExit as exc:  # argparse errors and --help
        code = exc.code
    out, err = capsys.readouterr()
    return code, out, err


def test_register_then_list(tmp_path, capsys):
    state = str(tmp_path / "state")
    code, out, _ = run(
        capsys,
        "resolver",
        "register",
        "--state-dir",
        state,
        "--serviceibi",
        SERVICE_A,
        "--key",
        KEY_A,
    )
    assert code == 0 and out.startswith(f"registered {SERVICE_A}")
    code, out, _ = run(
        capsys,
        "resolver",
        "register",
        "--state-dir",
        state,
        "--serviceibi",
        SERVICE_A,
        "--key",
        KEY_A,
    )
    assert code == 0 and out.startswith(f"re-keyed {SERVICE_A}")
    code, out, _ = run(capsys, "resolver", "list", "--state-dir", state)
    assert (code, out) == (0, f"{SERVICE_A}  not included\n")
    assert Registry(state).check_key(SERVICE_A, KEY_A)


def test_register_reads_the_key_from_stdin(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr("sys.stdin", io.StringIO(KEY_A + "\n"))
    code, _, _ = run(
        capsys,
        "resolver",
        "register",
        "--state-dir",
        str(tmp_path),
        "--serviceibi",
        SERVICE_A,
        "--key",
        "-",
    )
    assert code == 0 and Registry(tmp_path).check_key(SERVICE_A, KEY_A)


@pytest.mark.parametrize(
    "ibi,key,message",
    [
        (SERVICE_A, "12345", "Table 5.1"),
        ("not/an/ibi", KEY_A, "repository name"),
    ],
)
def test_register_refuses_bad_input(tmp_path, capsys, ibi, key, message):
    code, out, err = run(
        capsys,
        "resolver",
        "register",
        "--state-dir",
        str(tmp_path),
        "--serviceibi",
        ibi,
        "--key",
        key,
    )
    assert code == 2 and message in err and not out


def test_an_unusable_state_directory_is_one_line(tmp_path, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("")
    code, _, err = run(capsys, "resolver", "list", "--state-dir", str(blocker / "sub"))
    assert code == 2 and err.startswith("archive-service: registry ") and err.count("\n") == 1


def test_resolver_settings_come_from_their_own_table(tmp_path, monkeypatch, capsys):
    config_file = tmp_path / "resolver.yaml"
    config_file.write_text("timeout: 2.5\nrounds: 4\nstate_dir: state\n")
    monkeypatch.setenv("ARCHIVE_SERVICE_RESOLVER_ROUNDS", "6")
    monkeypatch.setenv("ARCHIVE_SERVICE_TIMEOUT", "9")  # the Archive's prefix: not ours
    config = rconfig.load(str(config_file), {"bind": "127.0.0.1:9999"})
    assert (config.timeout, config.rounds, config.bind) == (2.5, 6, "127.0.0.1:9999")
    assert config.state_dir == str(tmp_path / "state")  # relative to the file
    with pytest.raises(settings.ConfigError, match="setting timeout = '0'"):
        rconfig.load(options={"timeout": "0"}, environ={})
    with pytest.raises(settings.ConfigError, match="setting resolveribi"):
        rconfig.load(options={"resolveribi": "no"}, environ={})
    code, out, _ = run(capsys, "resolver", "serve", "--help")
    assert code == 0 and "ARCHIVE_SERVICE_RESOLVER_<NAME>" in out and "--timeout" in out
    code, out, _ = run(capsys, "serve", "--help")  # the Archive's own table is unchanged
    assert code == 0 and "ARCHIVE_SERVICE_<NAME>" in out and "--timeout" not in out


def test_register_from_names_the_networks_an_archive_sends_from(tmp_path, capsys):
    state = str(tmp_path / "state")
    base = ("resolver", "register", "--state-dir", state, "--serviceibi", SERVICE_A)
    code, _, _ = run(capsys, *base, "--key", KEY_A, "--from", "192.0.2.0/24, 2001:db8::/48")
    assert code == 0
    code, out, _ = run(capsys, "resolver", "list", "--state-dir", state)
    assert out == f"{SERVICE_A}  not included; sends from 192.0.2.0/24 2001:db8::/48\n"
    code, _, err = run(capsys, *base, "--key", KEY_A, "--from", "192.0.2.300")
    assert code == 2 and "192.0.2.300 is neither an IP address nor a network" in err


def test_a_registry_made_before_sends_from_gets_the_column(tmp_path):
    """A resolver's SQLite file from an earlier version: opened, it gains the column and
    keeps its Archives."""
    import sqlite3

    old = (
        "CREATE TABLE archive (ibikey TEXT PRIMARY KEY, serviceibi TEXT NOT NULL, "
        "salt BLOB NOT NULL, keyhash BLOB NOT NULL, registered TEXT NOT NULL, "
        "included INTEGER NOT NULL DEFAULT 0, since TEXT, address TEXT, ip TEXT, "
        "platformversion TEXT, email TEXT, confirmation TEXT)"
    )
    registry = Registry(tmp_path / "state")
    path = registry.where
    conn = sqlite3.connect(path)
    conn.execute("DROP TABLE archive")
    conn.execute(old)
    conn.execute(
        "INSERT INTO archive (ibikey, serviceibi, salt, keyhash, registered) "
        "VALUES ('k', ?, x'00', x'00', 'then')",
        (SERVICE_A,),
    )
    conn.commit()
    conn.close()
    again = Registry(tmp_path / "state")
    assert [(r.serviceibi, r.sends_from) for r in again.records()] == [(SERVICE_A, None)]
