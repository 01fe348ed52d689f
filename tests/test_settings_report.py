"""Wrong settings are reported all at once, each with its key, the rule it breaks and how to
fix it; a misspelled key in the file is one plain line (issue 18)."""

from __future__ import annotations

import subprocess

from serve_process import SAMPLE, command, free_port


def run(args: list[str], env: dict | None = None) -> subprocess.CompletedProcess:
    child = command(args, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    out, err = child.communicate(timeout=60)
    return subprocess.CompletedProcess(args, child.returncode, out, err)


def test_every_wrong_setting_in_one_message(tmp_path):
    config = tmp_path / "archive-service.yaml"
    config.write_text("workers: 0\nresolver: ftp://resolver.example.org\n")
    config.chmod(0o600)
    done = run(
        [
            "serve",
            "--config",
            str(config),
            "--collection",
            str(SAMPLE),
            "--state-dir",
            str(tmp_path / "state"),
            "--bind",
            "nowhere",
            "--archiveaddress",
            "http://archive.example.org/",
            "--threads",
            "many",
        ],
        env={"ARCHIVE_SERVICE_REGISTRATIONKEY": "12345"},
    )
    assert done.returncode == 2, done.stderr
    err = done.stderr
    for key, rule in [
        ("workers", "must be 1 or more"),
        ("resolver", "must be an http:// or https:// URL"),
        ("bind", "must be HOST:PORT"),
        ("archiveaddress", "must be host[:port]"),
        ("threads", "threads"),
        ("registrationkey", "10 or more digits"),
    ]:
        assert any(key in line and rule in line for line in err.splitlines()), (key, err)
    assert "12345" not in err  # the key is a secret, even a wrong one
    assert "6 settings" in err.splitlines()[0]
    assert "Traceback" not in err


def test_missing_announcing_settings_are_listed_together(tmp_path):
    done = run(
        [
            "serve",
            "--collection",
            str(SAMPLE),
            "--state-dir",
            str(tmp_path / "state"),
            "--bind",
            f"127.0.0.1:{free_port()}",
            "--archiveaddress",
            "archive.example.org",
            "--resolver",
            "https://resolver.example.org/J8LNKB5R7W/3FUQHC5",
        ],
        env={"ARCHIVE_SERVICE_REGISTRATIONKEY": "5550001234-9990004321"},
    )
    assert done.returncode == 2
    err = done.stderr
    assert "archiveip" in err and "archiveadmemailaddress" in err, err
    assert "2 settings" in err.splitlines()[0]


def test_a_misspelled_key_is_one_plain_line_with_a_suggestion(tmp_path):
    config = tmp_path / "archive-service.yaml"
    config.write_text(f"collection: {SAMPLE}\narchiveadress: archive.example.org\n")
    done = run(["check", "--config", str(config)])
    assert done.returncode == 0, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, lines
    assert "unknown setting 'archiveadress' ignored" in lines[0]
    assert "did you mean archiveaddress?" in lines[0]
    assert "ConfigWarning" not in lines[0] and "warnings.warn" not in done.stderr
