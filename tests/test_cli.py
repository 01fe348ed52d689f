"""The command line: check, query and serve, run the way an admin runs them."""

from __future__ import annotations

import urllib.request
from pathlib import Path

import pytest

from archive_service.cli import main
from archive_service.collection import items as index
from archive_service.protocol import pairs
from serve_process import Serve
from support import SAMPLE, SERVICE, break_collection

ROOT = Path(__file__).resolve().parent.parent
CONFIG = SAMPLE / "archive-service.yaml"


def test_check_passes_on_the_sample(capsys):
    assert main(["check", str(SAMPLE)]) == 0
    assert "15 items, no problems" in capsys.readouterr().out


def test_check_takes_the_state_dir_it_uses_as_an_option(tmp_path, capsys):
    # It reads state_dir (as the config file or the environment give it); --state-dir was a
    # usage error.
    assert main(["check", str(SAMPLE), "--state-dir", str(tmp_path / "state")]) == 0
    assert "no problems" in capsys.readouterr().out


def test_check_lists_every_problem_of_a_broken_collection(collection, capsys):
    break_collection(collection)
    assert main(["check", str(collection)]) == 1
    out = capsys.readouterr().out
    assert "09.09.22.01/item.yaml: YAML syntax error at line" in out
    assert "unknown key 'colour'" in out
    assert "8jmkd3mgp8w/35mme4e is also claimed by" in out
    assert "nextedition chain has a cycle" in out
    assert "metadata: IBI 'not/an/ibi' has 3 segments" in out
    # The stray IBIp directory does not hide the item filed under its repository name.
    served = index.scan(collection).lookup("8JMKD3MGP8W/35MME4E")
    assert served.directory == "sid.inpe.br/mtc-m18@80/2009/07.21.13.23"


def test_query_prints_what_url_request_answers(capsys):
    assert (
        main(
            [
                "query",
                "8JMKD3MGP8W/35MMLL8",
                "--config",
                str(CONFIG),
                "--verblist",
                "GetLastEdition GetMetadata(oai_dc)",
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert out.endswith("\n") and not out.endswith("\n\n")  # a shell prompt starts a new line
    got = dict(pairs.parse(out.strip().replace("\n", "\r\n")))
    assert got["ibi.nextedition"] == "{rep sid.inpe.br/mtc-m18/2012/07.12.18.08}"
    assert got["url.lastedition.metadata(oai_dc)"] == (
        "http://localhost:8080/col/sid.inpe.br/mtc-m18/2012/07.12.18.08.49/doc/oai_dc.xml"
    )


def test_query_reports_bad_input_and_unknown_ibis(capsys):
    assert main(["query", "not-an-ibi", "--config", str(CONFIG)]) == 2
    assert "error {parsedibiurl.ibi is neither" in capsys.readouterr().err
    assert main(["query", "8JMKD3MGP8W/22222", "--config", str(CONFIG)]) == 0
    assert "not held by this Archive" in capsys.readouterr().err


@pytest.mark.parametrize(
    "argv, usage",
    [
        (["stats", "--top", "3", "--nope"], "usage: archive-service stats "),
        (["import", "manifest", "m.csv", "--nope"], "usage: archive-service import manifest "),
        (["resolver", "serve", "--nope"], "usage: archive-service resolver serve "),
    ],
)
def test_an_unknown_option_is_refused_with_the_commands_own_usage(argv, usage, capsys):
    with pytest.raises(SystemExit) as stopped:
        main(argv)
    assert stopped.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith(usage)
    assert f"unrecognized arguments: {argv[-1]}" in err


def test_missing_setting_stops_with_one_line(tmp_path, capsys):
    # archiveaddress and archiveserviceibi have defaults since issue 18; the collection not.
    assert main(["query", "LK47B6W/362SFKH", "--state-dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "setting collection is missing" in err[0]
    assert not list(tmp_path.iterdir())  # nothing minted for a command that stopped


def _get(url: str) -> tuple[int, bytes]:
    with urllib.request.urlopen(url, timeout=5) as response:
        return response.status, response.read()


@pytest.fixture
def served(tmp_path):
    """The real `archive-service serve` process on a free loopback port."""
    serve = Serve(tmp_path, "--state-dir", str(tmp_path / "state"), config=CONFIG)
    try:
        serve.wait_answering(timeout=20)
        yield serve
    finally:
        serve.kill()


@pytest.mark.process
def test_serve_runs_gunicorn_and_answers_over_http(served):
    base = f"http://{served.address}"
    status, body = _get(
        f"{base}/{SERVICE}?servicesubject=urlRequest"
        "&clientinformation.ipaddress=127.0.0.1&parsedibiurl.ibi=LK47B6W/362SFKH"
    )
    got = dict(pairs.parse(body.decode()))
    assert status == 200 and got["url"] == (
        f"{base}/col/iconet.com.br/banon/2009/09.09.22.01/doc/@relatorio.pdf"
    )
    status, pdf = _get(got["url"])
    assert status == 200 and pdf.startswith(b"%PDF")
    # gunicorn gives busy workers graceful_timeout (30 s) before killing them.
    code = served.stop(timeout=60)
    text = served.log()
    assert code == 0, text
    assert "Starting gunicorn" in text and "Booting worker" in text
    assert "Traceback" not in text
