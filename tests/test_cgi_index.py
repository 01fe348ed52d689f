"""Under CGI and mod_wsgi no request waits for a walk of the collection (issue 23): contrib's
.cgi and .wsgi files answer from the persistent index as it stands, which `archive-service
index` (or `index --watch`) keeps current; with no index yet they answer 503 and say what to
run, and build none."""

from __future__ import annotations

import importlib.util
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest
import webtest

from archive_service import cli
from fronts import (
    COLLECTION,
    CONTRIB,
    TARGET_IBI,
    WSGI_FILE,
    executable,
    rewrite,
    run_cgi,
    unit_values,
)
from serve_process import SAMPLE, SERVICE

NOT_INDEXED = b"The Archive's index is not built yet: run archive-service index\n"
NEW_ITEM = "example.org/cgi/2024/01.01.00.00"
URL_REQUEST = "servicesubject=urlRequest&clientinformation.ipaddress=127.0.0.1&parsedibiurl.ibi="


def archive(tmp_path: Path) -> Path:
    """A copy of the sample collection, its settings file (state_dir in tmp_path)."""
    shutil.copytree(SAMPLE, tmp_path / "collection")
    config = tmp_path / "archive-service.yaml"
    config.write_text(
        f"collection: {tmp_path / 'collection'}\nstate_dir: {tmp_path / 'state'}\n"
        f"archiveaddress: archive.example.org\narchiveserviceibi: {SERVICE}\n"
        "resolver: none\nindex_watch: 'off'\n"
    )
    return config


def add_item(config: Path) -> None:
    doc = config.parent / "collection" / NEW_ITEM / "doc"
    doc.mkdir(parents=True)
    (doc / "index.html").write_text("<p>new</p>\n")


def index(config: Path) -> None:
    assert cli.main(["index", "--config", str(config)]) == 0


def indexes(config: Path) -> list[Path]:
    return list((config.parent / "state").rglob("*.sqlite3"))


@pytest.mark.process
def test_cgi_without_an_index_answers_503_and_builds_none(tmp_path):
    config = archive(tmp_path)
    errors: list[str] = []
    head, body = run_cgi(f"/{SERVICE}", URL_REQUEST + TARGET_IBI, config, errors)
    assert head.startswith("Status: 503"), head
    assert body == NOT_INDEXED
    assert len(errors) == 1 and errors[0].endswith("run archive-service index"), errors
    assert str(tmp_path / "collection") in errors[0]
    assert indexes(config) == []


@pytest.mark.process
def test_cgi_answers_from_the_index_as_it_stands(tmp_path):
    """An item added after the last `archive-service index` is not found by a CGI request
    (it walked nothing), and is once the index is brought up to date."""
    config = archive(tmp_path)
    index(config)
    head, body = run_cgi(f"/{SERVICE}", URL_REQUEST + TARGET_IBI, config)
    assert head.startswith("Status: 200") and body.startswith(b"archiveaddress "), body
    add_item(config)
    head, body = run_cgi(f"/{SERVICE}", URL_REQUEST + NEW_ITEM, config)
    assert head.startswith("Status: 200") and body == b"", body  # not held here
    index(config)
    head, body = run_cgi(f"/{SERVICE}", URL_REQUEST + NEW_ITEM, config)
    assert head.startswith("Status: 200") and body.startswith(b"archiveaddress "), body


def wsgi_application(monkeypatch, config: Path):
    """contrib's .wsgi file loaded as mod_wsgi loads it, with the settings of `config`."""
    monkeypatch.setenv("ARCHIVE_SERVICE_CONFIG", str(config))
    spec = importlib.util.spec_from_loader("archive_service_wsgi", loader=None)
    module = importlib.util.module_from_spec(spec)
    exec(compile(WSGI_FILE.read_text(), str(WSGI_FILE), "exec"), module.__dict__)
    return webtest.TestApp(module.application, extra_environ={"SCRIPT_NAME": ""})


@pytest.mark.process
def test_wsgi_daemon_answers_503_until_the_index_is_built(tmp_path, monkeypatch, caplog):
    """A mod_wsgi daemon started before any index answers 503 (and builds none), then serves
    from the index once `archive-service index` has built it, without a restart."""
    config = archive(tmp_path)
    app = wsgi_application(monkeypatch, config)
    confirm = f"/{SERVICE}?servicesubject=inclusionConfirmationRequest"
    assert app.get(confirm, status=503).body == NOT_INDEXED
    assert "run archive-service index" in caplog.text
    assert indexes(config) == []
    index(config)
    assert app.get(confirm).text == "confirmation yes"
    assert app.get(f"/{SERVICE}?{URL_REQUEST}{TARGET_IBI}").text.startswith("archiveaddress ")
    # The pages' templates, compiled when first rendered under mod_wsgi and CGI.
    for page in ("about", "items", "statistics"):
        assert "</html>" in app.get(f"/{SERVICE}/{page}").text


@pytest.mark.process
def test_wsgi_daemon_starts_without_walking_the_collection(tmp_path, monkeypatch):
    config = archive(tmp_path)
    index(config)
    add_item(config)
    app = wsgi_application(monkeypatch, config)
    assert app.get(f"/{SERVICE}?{URL_REQUEST}{NEW_ITEM}").body == b""  # not held here


SYSTEMD = CONTRIB / "systemd"
UNITS = ("archive-service-indexer.service", "archive-service-index.service")


@pytest.mark.parametrize("name", UNITS)
def test_indexer_units_run_the_index_command_as_an_unprivileged_user(name):
    unit = unit_values(SYSTEMD / name)
    command = shlex.split(unit["ExecStart"][0])
    args = cli.build_parser().parse_args(command[1:])
    assert args.func is cli.cmd_index and args.config
    assert args.watch == (name == "archive-service-indexer.service")
    assert unit["User"][0] not in ("root", "0")
    # Where the CGI and mod_wsgi steps keep the index (state_dir) and the collection.
    assert unit["ReadWritePaths"] == ["/var/lib/archive-service"]
    assert unit["ReadOnlyPaths"] == [COLLECTION]


def test_index_timer_starts_the_index_service():
    timer = unit_values(SYSTEMD / "archive-service-index.timer")
    assert "OnUnitInactiveSec" in timer and timer["WantedBy"] == ["timers.target"]


@pytest.mark.process
@pytest.mark.skipif(not executable("systemd-analyze"), reason="systemd-analyze not installed")
def test_indexer_units_pass_systemd_analyze_verify(tmp_path):
    names = (*UNITS, "archive-service-index.timer")
    program = "/opt/archive-service/venv/bin/archive-service"
    for name in names:
        # verify checks that the program exists; stand in for the venv's console script.
        text = (SYSTEMD / name).read_text()
        if name in UNITS:
            text = rewrite(text, (program, shutil.which("true") or "/bin/true"))
        (tmp_path / name).write_text(text)
    result = subprocess.run(
        ["systemd-analyze", "verify", *(str(tmp_path / n) for n in names)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert result.returncode == 0 and not result.stderr.strip(), result.stderr
