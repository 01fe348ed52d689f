"""Wrong settings are reported all at once, each with its key, the rule it breaks and how to
fix it; a misspelled key in the file is one plain line (issue 18)."""

from __future__ import annotations

from serve_process import SAMPLE, run_command


def test_every_wrong_setting_in_one_message(tmp_path):
    config = tmp_path / "archive-service.yaml"
    config.write_text("workers: 0\nresolver: ftp://resolver.example.org\n")
    config.chmod(0o600)
    done = run_command(
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


def test_a_misspelled_key_is_one_plain_line_with_a_suggestion(tmp_path):
    config = tmp_path / "archive-service.yaml"
    config.write_text(f"collection: {SAMPLE}\narchiveadress: archive.example.org\n")
    done = run_command(["check", "--config", str(config)])
    assert done.returncode == 0, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, lines
    assert "unknown setting 'archiveadress' ignored" in lines[0]
    assert "did you mean archiveaddress?" in lines[0]
    assert "ConfigWarning" not in lines[0] and "warnings.warn" not in done.stderr
