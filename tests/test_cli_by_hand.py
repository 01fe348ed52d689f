"""Commands an admin runs by hand beside the service (issue 18): they read the service's state
dir and say which one, `query` and `check` need nothing but a collection and list only their
own options, and a pipe closed early (`| head`) is no traceback."""

from __future__ import annotations

import subprocess

import pytest

from archive_service import settings
from archive_service.cli import build_parser, main
from serve_process import SAMPLE, command

LL8 = "8JMKD3MGP8W/35MMLL8"


def test_stats_and_query_say_which_state_dir_they_read(tmp_path, capsys):
    state = tmp_path / "var-lib"
    config = tmp_path / "archive-service.yaml"
    config.write_text(f"collection: {SAMPLE}\nstate_dir: {state}\n")
    assert main(["stats", "--config", str(config)]) == 0
    err = capsys.readouterr().err.strip().splitlines()
    assert [line for line in err if f"state dir {state}" in line and "config file" in line]
    assert main(["query", LL8, "--config", str(config)]) == 0
    out, err = capsys.readouterr()
    assert "url http://127.0.0.1:8080/col/" in out  # the address serve would default to
    assert f"state dir {state}" in err


def test_without_a_setting_the_state_dir_is_the_same_for_every_command(tmp_path, monkeypatch):
    monkeypatch.delenv("STATE_DIRECTORY", raising=False)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path))
    assert settings.default_state_dir() == str(tmp_path / "archive-service")
    monkeypatch.delenv("XDG_DATA_HOME")
    monkeypatch.setattr("os.geteuid", lambda: 0)  # root, as an admin's sudo: systemd's dir
    assert settings.default_state_dir() == "/var/lib/archive-service"
    from archive_service.deposit import mint

    assert str(mint.default_state_dir()) == "/var/lib/archive-service"


def test_query_and_check_work_on_a_collection_alone(tmp_path, capsys):
    assert main(["query", LL8, "--collection", str(SAMPLE), "--state-dir", str(tmp_path)]) == 0
    assert "state Original" in capsys.readouterr().out
    assert main(["check", "--collection", str(SAMPLE)]) == 0


@pytest.mark.parametrize(
    "name, foreign",
    [("query", ("--workers", "--bind", "--registrationkey", "--resolver", "--index-watch"))],
)
def test_query_help_lists_only_its_own_options(name, foreign, capsys):
    with pytest.raises(SystemExit):
        build_parser().parse_args([name, "--help"])
    text = capsys.readouterr().out
    assert "--collection" in text and "--state-dir" in text
    assert not [option for option in foreign if option in text]


@pytest.mark.parametrize(
    "args",
    [
        ["stats", "--format", "csv", "--top", "0"],
        ["query", LL8, "--collection", str(SAMPLE)],
    ],
)
def test_a_pipe_closed_early_is_no_traceback(tmp_path, args):
    child = command(
        [*args, "--state-dir", str(tmp_path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    child.stdout.close()  # `| head -0`: the reader is gone before anything is written
    with child.stderr:
        err = child.stderr.read().decode()
    child.wait(timeout=60)
    assert "Traceback" not in err and "BrokenPipeError" not in err, err
