"""`archive-service mint`, `ibi decode` and `ibi check`: the known values of SPEC §2 through the
command line, and the messages that say which rule of ID Table 6.1 / 7.1 fails where."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from archive_service import cli
from archive_service.protocol import ibi, ibip

ROOT = Path(__file__).resolve().parent.parent


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def fields(out: str) -> dict[str, str]:
    return dict(line.split(" ", 1) for line in out.splitlines())


# ------------------------------------------------------------------------- ibi decode


@pytest.mark.parametrize(
    "label, ip, port, time, fraction",
    [
        ("LK47B6W/362SFKH", "127.0.0.1", "800", "2009-09-09T22:01:00Z", "0"),
        ("lk47b6w/362sfkh", "127.0.0.1", "800", "2009-09-09T22:01:00Z", "0"),
        ("8JMKD3MGP7W/3EPGUE5", "150.163.34.242", "800", "2013-09-04T12:27:57Z", "0"),
        (
            "8JMKD3MGP8W/34PGRBS",
            "150.163.34.243",
            "800",
            "2009-02-16T17:46:00Z",
            "0",
        ),  # POSIX 1234806360
        # the sample item sid.inpe.br/mtc-m18@80/2009/07.21.13.23: same minute as its name
        ("8JMKD3MGP8W/35MME4E", "150.163.34.243", "800", "2009-07-21T13:23:00Z", "0"),
        ("J8LNKAN8PWU5H/3", "150.163.2.174", "19050", "1995-08-01T00:00:01Z", "0"),  # U5H = 19050
        ("7URMDHLL9SSN2D89MX/2", "2001:252:0:1::2008:6", "800", "1995-08-01T00:00:00Z", "0"),
        ("J8LNKAN8PWU5H/38ERE6SW3NS", "150.163.2.174", "19050", "2010-10-20T15:20:12Z", "0.293"),
    ],
)
def test_ibi_decode_known_values(capsys, label, ip, port, time, fraction):
    code, out, err = run(capsys, "ibi", "decode", label)
    assert (code, err) == (0, "")
    assert fields(out) == {"ip": ip, "port": port, "time": time, "fraction": fraction}


@pytest.mark.parametrize(
    "label, message",
    [
        ("LK47B6W/362SFK0", "character '0' at position 7"),
        ("LK47B6/362SFKH", "no 'W' (IPv4) or 'X' (IPv6)"),
        ("2LK47B6W/362SFKH", "leading zero digit '2' at position 1"),
        ("iconet.com.br/banon/2009/09.09.22.01", "is a repository name"),
        ("a/b/c", "has 3 segments"),
    ],
)
def test_ibi_decode_refuses_with_the_reason(capsys, label, message):
    code, out, err = run(capsys, "ibi", "decode", label)
    assert code == 1 and out == ""
    assert err.startswith("archive-service ibi decode: ") and message in err


# -------------------------------------------------------------------------- ibi check


@pytest.mark.parametrize(
    "label, form",
    [
        ("LK47B6W/362SFKH", "ibip"),
        ("8jmkd3mgp7w/3epgue5", "ibip"),
        ("iconet.com.br/banon/2009/09.09.22.01", "rep"),
        ("sid.inpe.br/mtc-m18@80/2009/07.21.13.23.47", "rep"),
        ("sid.inpe.br/mtc-m18.19050/2010/10.20.15.21.55.3", "rep"),
    ],
)
def test_ibi_check_valid_prints_the_form(capsys, label, form):
    assert run(capsys, "ibi", "check", label) == (0, form + "\n", "")


def test_ibi_check_valid_ibip_that_does_not_decode_says_so(capsys):
    code, out, err = run(capsys, "ibi", "check", "22W/3")  # Table 7.1 allows a leading 0 digit
    assert (code, out) == (0, "ibip\n")
    assert "does not decode" in err and "leading zero digit" in err


@pytest.mark.parametrize(
    "label, message",
    [
        (
            "sid.in_pe.br/mtc/2013/09.04.12.27",
            "subdomain 'sid.in_pe.br' breaks rule subdominio of ID Table 6.1 "
            "(character '_' at position 7: not a letter, digit or '-')",
        ),
        (
            "sid.9br/mtc/2013/09.04.12.27",
            "(character '9' at position 5: the last word of a subdomain must begin with a letter)",
        ),
        ("sid..br/mtc/2013/09.04.12.27", "(character '.' at position 5: empty word"),
        (
            "sid.inpe.br/-mtc/2013/09.04.12.27",
            '\'-mtc\' breaks rule palavra [("." | "@") porta] of ID Table 6.1 '
            "(character '-' at position 1: a word cannot begin with '-')",
        ),
        (
            "sid.inpe.br/mtc-/2013/09.04.12.27",
            "(character '-' at position 4: a word cannot end with '-')",
        ),
        (
            "sid.inpe.br/mtc@8x/2013/09.04.12.27",
            "(character 'x' at position 6: the port after '.' or '@' is digits only)",
        ),
        ("sid.inpe.br/mtc@/2013/09.04.12.27", "(at the end: a port (digits) must follow '@')"),
        (
            "sid.inpe.br/mtc/2o13/09.04.12.27",
            "year '2o13' must be 4 or more digits (character 'o' at position 2",
        ),
        ("sid.inpe.br/mtc/13/09.04.12.27", "year '13' must be 4 or more digits (it has 2)"),
        ("sid.inpe.br/mtc/2013/09.4.12.27", "(character '.' at position 5: DD must be 2 digits)"),
        ("sid.inpe.br/mtc/2013/09.04.12", "(at the end: mm is missing)"),
        (
            "sid.inpe.br/mtc/2013/09.04.12.27.123",
            "(character '3' at position 15: ss must be 2 digits)",
        ),
        (
            "sid.inpe.br/mtc/2013/09.04.12.27.00.1.2",
            "(character '.' at position 17: nothing may follow the fraction of a second)",
        ),
        ("sid.inpe.br/mtc/2013/13.04.12.27", "is not a UTC date (month must be in 1..12)"),
        (
            "8JMKD3MGP7W/3EPGUE0",
            "suffix '3EPGUE0' breaks rule palavra of ID Table 7.1 (character '0' at position 7)",
        ),
        ("8JMKD3MGP7W/", "suffix '' breaks rule palavra of ID Table 7.1 (it is empty)"),
        (
            "8JMK-3MGP7W/3EPGUE5",
            "prefix '8JMK-3MGP7W' breaks rule palavra of ID Table 7.1 "
            "(character '-' at position 5)",
        ),
        ("a/b/c", "has 3 segments: a repository name has 4, an IBIp 2"),
        ("a b/c", "contains white space"),
    ],
)
def test_ibi_check_invalid_names_rule_and_character(capsys, label, message):
    code, out, err = run(capsys, "ibi", "check", label)
    assert (code, err) == (1, "")
    assert out.startswith("invalid: ") and message in out, out


_SEGMENT = st.text(alphabet="ab9-.@_x0", max_size=7)


@settings(max_examples=300, deadline=None)
@given(
    _SEGMENT, _SEGMENT, st.text(alphabet="12o", max_size=5), st.text(alphabet="0123.x", max_size=18)
)
def test_every_rule_6_1_failure_is_located(subdomain, word, year, when):
    """Whatever breaks the grammar, the message points at a character (or the end)."""
    text = f"{subdomain}/{word}/{year}/{when}"
    try:
        ibi.parse(text)
    except ibi.IbiError as exc:
        message = str(exc)
        assert (
            "at position" in message
            or "at the end" in message
            or "it has" in message
            or "is not a UTC date" in message
            or "white space" in message
        ), message


# -------------------------------------------------------------------------------- mint

ADDRESS = ("--archiveaddress", "mtc-m16c.sid.inpe.br", "--archiveip", "150.163.2.174")


@pytest.mark.process
def test_mint_twice_from_two_processes_gives_two_distinct_labels(tmp_path):
    """The real console command, twice, sharing the distributor state."""
    state = str(tmp_path / "state")
    outputs = []
    for _ in range(2):
        done = subprocess.run(
            [sys.executable, "-m", "archive_service.cli", "mint", *ADDRESS, "--state-dir", state],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=30,
            check=True,
        )
        outputs.append(fields(done.stdout))
    reps = [o["rep"] for o in outputs]
    ibips = [o["ibip"] for o in outputs]
    assert len(set(reps)) == 2 and len(set(ibips)) == 2
    for rep, label in zip(reps, ibips):
        assert ibi.parse(rep).kind == "rep" and rep.startswith("sid.inpe.br/mtc-m16c/")
        decoded = ibip.decode(label)
        assert (decoded.ip, decoded.port) == ("150.163.2.174", 800)
        # Both forms come from the same creation time (Algorithm 4's data-para-sufixo).
        assert (
            rep.endswith(decoded.time.strftime("%Y/%m.%d.%H.%M"))
            or decoded.time.strftime("%Y/%m.%d.%H.%M.%S") in rep
        )


def test_mint_form_and_port(capsys, tmp_path):
    code, out, _ = run(
        capsys,
        "mint",
        "--host",
        "mtc-m18.sid.inpe.br",
        "--port",
        "19050",
        "--state-dir",
        str(tmp_path / "one"),
    )
    assert code == 0 and list(fields(out)) == ["rep"]
    assert fields(out)["rep"].startswith("sid.inpe.br/mtc-m18.19050/")
    code, out, _ = run(
        capsys,
        "mint",
        "--ip",
        "2001:252:0:1::2008:6",
        "--port",
        "19050",
        "--state-dir",
        str(tmp_path / "other"),
    )
    assert code == 0 and list(fields(out)) == ["ibip"]
    decoded = ibip.decode(fields(out)["ibip"])
    assert (decoded.ip, decoded.port) == ("2001:252:0:1::2008:6", 19050)
    code, out, _ = run(
        capsys,
        "mint",
        *ADDRESS,
        "--form",
        "ibip",
        "--granularity",
        "0.01",
        "--state-dir",
        str(tmp_path / "one"),
    )
    assert code == 0 and list(fields(out)) == ["ibip"]


def test_mint_takes_host_and_port_from_archiveaddress(capsys, tmp_path):
    code, out, _ = run(
        capsys,
        "mint",
        "--archiveaddress",
        "mtc-m18.sid.inpe.br:19050",
        "--archiveip",
        "150.163.2.174",
        "--state-dir",
        str(tmp_path),
    )
    assert code == 0
    assert fields(out)["rep"].startswith("sid.inpe.br/mtc-m18.19050/")
    assert ibip.decode(fields(out)["ibip"]).port == 19050


def test_mint_reads_the_config_file(capsys, tmp_path):
    config = tmp_path / "archive.yaml"
    config.write_text(f"archiveaddress: mtc-m16c.sid.inpe.br\nstate_dir: {tmp_path / 'state'}\n")
    code, out, _ = run(capsys, "mint", "--config", str(config))
    assert code == 0 and list(fields(out)) == ["rep"]  # no archiveip: the name only
    assert (tmp_path / "state" / "mint-last-date").is_file()


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--host", "localhost"], "'localhost' must be a domain name of two or more words"),
        (["--host", "a_b.inpe.br"], "breaks rule palavra"),
        (["--host", "mtc-m16c.sid.inpe.br", "--form", "both"], "an IBIp needs an IP address"),
        (["--ip", "0.1.2.3"], "starts with 0"),
        (
            [],
            "no IBI can be minted: a repository name needs a host (archiveaddress or --host); "
            "an IBIp needs an IP address (archiveip or --ip)",
        ),
    ],
)
def test_mint_refusals_say_why(capsys, tmp_path, argv, message):
    code, out, err = run(capsys, "mint", *argv, "--state-dir", str(tmp_path))
    assert code == 1 and out == ""
    assert err.startswith("archive-service mint: ") and message in err, err


def test_mint_bad_granularity_is_a_usage_error(capsys, tmp_path):
    with pytest.raises(SystemExit) as exit_:
        cli.main(["mint", "--host", "a.b", "--granularity", "2", "--state-dir", str(tmp_path)])
    assert exit_.value.code == 2
    assert "not 60, 1, 0.1, 0.01" in capsys.readouterr().err
