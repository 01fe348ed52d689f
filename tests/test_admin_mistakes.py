"""Mistakes a new administrator makes, each answered by one plain line saying what is wrong,
where, and the fix when it is obvious: never a traceback."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from archive_service import settings
from archive_service.cli import main
from serve_process import SAMPLE, run_command

ITEM = "example.org/archive/2026/11.27.03.08.09"
SERVICE = "LK47B6WD4K/4GS3LR8"


def _item(collection: Path, sidecar: str) -> Path:
    item = collection / ITEM
    (item / "doc").mkdir(parents=True)
    (item / "doc" / "a.txt").write_text("a\n")
    (item / "item.yaml").write_text(sidecar)
    return item


def test_a_date_that_is_no_date_in_a_sidecar_is_a_problem_of_its_item(tmp_path, capsys):
    # An unquoted `timestamp: 2026-02-30` made PyYAML raise a bare ValueError: `check`,
    # `index` and `serve` stopped with a traceback.
    _item(tmp_path / "col", "timestamp: 2026-02-30\n")
    assert main(["check", str(tmp_path / "col")]) == 1
    out = capsys.readouterr().out
    assert f"{ITEM}/item.yaml: YAML syntax error at line 1, column 12:" in out
    assert "'2026-02-30' is not a valid date" in out and "quote it" in out


def test_a_date_that_is_no_date_in_the_config_file_is_one_line(tmp_path):
    path = tmp_path / "archive-service.yaml"
    path.write_text("collection: col\nworkers: 2026-13-01\n")
    with pytest.raises(settings.ConfigError) as caught:
        settings.load(str(path), {}, {})
    assert str(caught.value).startswith(f"config file {path} line 2: '2026-13-01' is not a valid")


@pytest.mark.parametrize(
    "kind, why", [("missing", "no such directory"), ("file", "is a file, not a directory")]
)
def test_a_collection_that_is_no_directory_stops_before_anything_is_minted(
    tmp_path, capsys, kind, why
):
    collection = tmp_path / "col"
    if kind == "file":
        collection.write_text("")
    state = tmp_path / "state"
    config = tmp_path / "archive-service.yaml"
    config.write_text(f"collection: {collection}\nstate_dir: {state}\nresolver: none\n")
    for command in (["query", SERVICE], ["serve"], ["check"], ["index"]):
        assert main([*command, "--config", str(config)]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert err == [
            f"archive-service: setting collection = '{collection}' (config file {config}): {why}"
        ], command
    assert not state.exists()  # no service IBI minted, no index made


@pytest.mark.process
def test_a_bind_address_in_use_says_which_setting_and_why(tmp_path):
    # gunicorn said "Connection in use: ('127.0.0.1', 8080)" and "Can't connect to …":
    # neither the setting to change nor that another process holds the port.
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        bind = f"127.0.0.1:{holder.getsockname()[1]}"
        done = run_command(
            ["serve", "--collection", str(SAMPLE), "--state-dir", str(tmp_path / "state")]
            + ["--no-announce", "--bind", bind, "--archiveserviceibi", SERVICE]
        )
    assert done.returncode == 1
    assert "Connection in use" not in done.stderr and "Can't connect" not in done.stderr
    last = done.stderr.strip().splitlines()[-1]
    assert last.endswith(
        f"ERROR gunicorn.error: cannot listen on {bind} (setting bind): [Errno 98] Address "
        "already in use; another process listens there (ss -ltnp shows which): stop it, or "
        "give another bind"
    )


@pytest.mark.parametrize(
    "variable, meant",
    [
        ("ARCHIVE_SERVICE_COLECTION", "ARCHIVE_SERVICE_COLLECTION"),
        ("ARCHIVE_SERVICE_WORKRES", "ARCHIVE_SERVICE_WORKERS"),
        ("archive_service_state_dir", "ARCHIVE_SERVICE_STATE_DIR"),
    ],
)
def test_a_mistyped_environment_variable_is_named_with_the_setting_meant(variable, meant):
    # It was ignored in silence: the admin read only "setting collection is missing".
    with pytest.warns(settings.ConfigWarning) as caught:
        settings.collect(None, {}, {variable: "/srv/col"})
    assert [str(w.message) for w in caught] == [
        f"environment variable {variable} is no setting and is ignored (did you mean {meant}?)"
    ]


def test_other_variables_of_the_prefix_are_no_mistake(recwarn):
    others = ("CONFIG", "RESOLVER_TIMEOUT", "TEST_STATE_DIR", "BENCH_CACHE", "COLLECTION")
    settings.collect(None, {}, {f"ARCHIVE_SERVICE_{name}": "x" for name in others})
    assert not [w for w in recwarn if issubclass(w.category, settings.ConfigWarning)]


def test_serve_as_root_is_warned_of_once_with_what_it_does_to_the_state_dir(tmp_path, monkeypatch):
    from archive_service.serve import runner

    config = settings.load(None, {"collection": str(tmp_path), "state_dir": "/srv/state"}, {})
    monkeypatch.setattr(runner.os, "geteuid", lambda: 1000)
    assert runner.root_warning(config) is None
    monkeypatch.setattr(runner.os, "geteuid", lambda: 0)
    warning = runner.root_warning(config)
    assert warning.startswith("serve runs as root, which it never needs")
    assert (
        "state_dir /srv/state belongs to root" in warning and "sudo -u archive-service" in warning
    )
    assert "\n" not in warning


def test_a_tab_and_a_misspelt_key_in_a_sidecar_are_named(tmp_path, capsys):
    item = _item(tmp_path / "col", "langauge: en\n")
    assert main(["check", str(tmp_path / "col")]) == 1
    assert "unknown key 'langauge' (ignored; did you mean language?)" in capsys.readouterr().out
    (item / "item.yaml").write_text("language: en\ndc:\n\ttitle: A\n")
    assert main(["check", str(tmp_path / "col")]) == 1
    out = capsys.readouterr().out
    assert (
        "YAML syntax error at line 3, column 1: found character that cannot start any token "
        "(a tab: YAML indents with spaces only)"
    ) in out


def test_a_tab_in_the_config_file_is_named(tmp_path):
    path = tmp_path / "archive-service.yaml"
    path.write_text("collection: col\ntrusted_proxies:\n\t- 10.0.0.1\n")
    with pytest.raises(settings.ConfigError, match=r"line 3: .* \(a tab: YAML indents with spaces"):
        settings.load(str(path), {}, {})


@pytest.mark.parametrize(
    ("bind", "proxies", "warned"),
    [
        ("127.0.0.1:8080", "127.0.0.0/8", False),
        ("[::1]:8080", "127.0.0.0/8", False),
        ("localhost:8080", "none", False),
        ("127.1:8080", "none", False),  # what the resolver library makes 127.0.0.1
        ("[::ffff:127.0.0.1]:8080", "none", False),  # loopback as a dual-stack socket has it
        ("unix:/run/archive-service.sock", "none", False),
        ("0.0.0.0:8080", "127.0.0.0/8 ::1", True),
        ("192.0.2.7:8080", "none", True),
        ("[::]:8080", "127.0.0.0/8", True),
        ("0.0.0.0:8080", "127.0.0.0/8 10.0.0.5", False),  # a proxy on another machine
    ],
)
def test_serve_reachable_from_other_machines_without_a_proxy_is_warned_of(
    tmp_path, bind, proxies, warned
):
    from archive_service.serve import runner

    options = {"collection": str(tmp_path), "bind": bind, "trusted_proxies": proxies}
    warning = runner.proxy_warning(settings.load(None, options, {}))
    assert (warning is not None) == warned
    if warned:
        assert warning.startswith(f"serve listens on {bind} with no proxy in front")
        assert "contrib/" in warning and "\n" not in warning


@pytest.mark.parametrize("bind", ["::1:8080", "::8080", "fe80::1:80"])
def test_an_ipv6_bind_without_brackets_is_refused_by_the_settings_not_by_gunicorn(tmp_path, bind):
    """`bind: ::1:8080` passed the settings, then gunicorn split it at its first colon and
    failed to start. The settings say what to write instead."""
    with pytest.raises(settings.ConfigError) as raised:
        settings.load(None, {"collection": str(tmp_path), "bind": bind}, {})
    assert "an IPv6 address goes in brackets" in str(raised.value)
    assert settings.load(None, {"collection": str(tmp_path), "bind": "[::1]:8080"}, {}).bind
