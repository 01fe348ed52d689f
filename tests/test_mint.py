"""Repository names (ID Algorithms 1-3), the temporal distributor (Algorithm 4, Table 6.2)
and minting, including two real processes minting at once."""

import os
import subprocess
import sys
import time
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from archive_service.deposit import mint
from archive_service.protocol import ibi, ibip
from archive_service.protocol.ibi import IbiError

UTC = UTC
ROOT = Path(__file__).resolve().parent.parent


# --- Algorithm 1 ---


@pytest.mark.parametrize(
    ("host", "port", "prefix"),
    [
        ("mtc-m18.sid.inpe.br", 80, "sid.inpe.br/mtc-m18"),
        ("MTC-M19.SID.INPE.BR", 80, "sid.inpe.br/mtc-m19"),
        ("mtc-m18.sid.inpe.br", 19050, "sid.inpe.br/mtc-m18.19050"),
        ("banon.iconet.com.br", 80, "iconet.com.br/banon"),
        ("a.b", 8080, "b/a.8080"),
    ],
)
def test_rep_prefix(host, port, prefix):
    assert mint.rep_prefix(host, port) == prefix


@pytest.mark.parametrize(
    ("host", "port", "message"),
    [
        ("localhost", 80, "two or more words"),
        ("150.163.2.174", 80, "subdominio"),  # the last word must start with a letter
        ("a_b.inpe.br", 80, "palavra"),
        ("mtc-m18.sid.inpe.br", 0, "1..65535"),
    ],
)
def test_rep_prefix_refuses(host, port, message):
    with pytest.raises(IbiError, match=message):
        mint.rep_prefix(host, port)


# --- Algorithm 2 ---


@pytest.mark.parametrize(
    ("t", "suffix"),
    [
        (Decimal(1287588000), "2010/10.20.15.20"),
        (Decimal(1287588115), "2010/10.20.15.21.55"),
        (Decimal("1287588115.3462"), "2010/10.20.15.21.55.3462"),
        (Decimal("1287588060.5"), "2010/10.20.15.21.00.5"),  # a fraction brings its .00
        (Decimal("1287588060.500"), "2010/10.20.15.21.00.5"),
        (Decimal("1287588060.05"), "2010/10.20.15.21.00.05"),
        (datetime(2013, 9, 4, 12, 27, 57, tzinfo=UTC), "2013/09.04.12.27.57"),
        (1252533660, "2009/09.09.22.01"),
    ],
)
def test_rep_suffix(t, suffix):
    assert mint.rep_suffix(t) == suffix


# --- Algorithm 3, and the seed's pairs of forms of one IBI ---


@pytest.mark.parametrize(
    ("host", "ibip_text", "rep"),
    [
        ("mtc-m19.sid.inpe.br", "8JMKD3MGP7W/3EPGUE5", "sid.inpe.br/mtc-m19/2013/09.04.12.27.57"),
        ("banon.iconet.com.br", "LK47B6W/362SFKH", "iconet.com.br/banon/2009/09.09.22.01"),
        ("mtc-m18.sid.inpe.br", "8JMKD3MGP8W/34PGRBS", "sid.inpe.br/mtc-m18/2009/02.16.17.46"),
    ],
)
def test_rep_name_of_the_same_time_as_a_seed_ibip(host, ibip_text, rep):
    when = ibip.decode(ibip_text).time
    assert mint.rep_name(mint.rep_prefix(host, 80), mint.rep_suffix(when)) == rep


# --- Algorithm 4 ---

TABLE_6_2 = [
    # t_i, t(i), wait, suffix
    ("1287587646.394023", 1287587646, "0", "2010/10.20.15.14.06"),
    ("1287588012.2930", 1287588000, "0", "2010/10.20.15.20"),
    ("1287588115.186234", 1287588060, "0", "2010/10.20.15.21"),
    ("1287588115.3462", 1287588115, "0", "2010/10.20.15.21.55"),
    ("1287588115.99623", 1287588116, "0.00377", "2010/10.20.15.21.56"),
    ("1287588116.72", 1287588117, "0.28", "2010/10.20.15.21.57"),
    ("1287588539.788342", 1287588480, "0", "2010/10.20.15.28"),
]


def test_distribute_table_6_2():
    last = None
    for current, expected, wait, suffix in TABLE_6_2:
        last, waited = mint.distribute(Decimal(current), last, 1)
        assert (last, waited, mint.rep_suffix(last)) == (expected, Decimal(wait), suffix)


def test_distribute_takes_floats_by_their_digits():
    last = None
    for current, expected, _, _ in TABLE_6_2:
        last, _ = mint.distribute(float(current), last, 1.0)
        assert last == expected


def test_distribute_with_a_coarser_granularity_after_a_finer_one():
    # Line 4 puts the last date back on the new grid.
    assert mint.distribute(Decimal("100.5"), Decimal("100.37"), 1) == (101, Decimal("0.5"))


def test_distribute_minute_granularity():
    assert mint.distribute(Decimal(1287588115), None, 60) == (1287588060, 0)
    assert mint.distribute(Decimal(1287588116), Decimal(1287588060), 60) == (1287588120, 4)


@pytest.mark.parametrize("r", ["60", "1", "0.1", "0.001", 0.01, 1, 60])
def test_granularities_of_g(r):
    assert mint.as_granularity(r) == Decimal(str(r))


@pytest.mark.parametrize("r", ["10", "0.5", "2", "0", "-1", "120"])
def test_granularities_outside_g(r):
    with pytest.raises(ValueError):
        mint.as_granularity(r)


@settings(max_examples=300, deadline=None)
@given(
    r=st.sampled_from(["60", "1", "0.1", "0.01", "0.001"]).map(Decimal),
    start=st.integers(1_000_000_000, 4_000_000_000),
    gaps=st.lists(st.integers(0, 200_000), min_size=1, max_size=30),
)
def test_distribute_never_repeats_and_never_runs_ahead(r, start, gaps):
    """Fed requests in order (each after the previous wait), dates strictly increase, lie on
    the grid, are never after the creation date, and the wait never exceeds r."""
    current, last, suffixes = Decimal(start), None, set()
    for gap in gaps:
        current += Decimal(gap).scaleb(-3)  # gaps of 0 to 200 s, to the millisecond
        t, wait = mint.distribute(current, last, r)
        assert 0 <= wait <= r
        assert last is None or t > last
        assert t <= current + wait
        assert t % r == 0
        suffixes.add(mint.rep_suffix(t))
        current, last = current + wait, t
    assert len(suffixes) == len(gaps)


# --- the Distributor: state across instances (restarts) ---


class FakeClock:
    def __init__(self, now):
        self.now = Decimal(now)
        self.slept = []

    def __call__(self):
        return self.now

    def sleep(self, seconds):
        self.slept.append(Decimal(str(seconds)))
        self.now += Decimal(str(seconds))


def test_distributor_persists_the_last_date(tmp_path):
    clock = FakeClock("1287588115.3462")
    first = mint.Distributor(tmp_path, 1, clock=clock, sleep=clock.sleep)
    assert first.last() is None
    assert first.next_time() == 1287588115
    assert (tmp_path / mint.STATE_FILE).read_text() == "1287588115\n"
    # A new instance (a restart) goes on from the file: same second, so it must wait.
    again = mint.Distributor(tmp_path, 1, clock=clock, sleep=clock.sleep)
    assert again.next_time() == 1287588116
    assert clock.slept == [Decimal("0.6538")]


def test_distributor_refuses_a_corrupt_state(tmp_path):
    (tmp_path / mint.STATE_FILE).write_text("yesterday\n")
    with pytest.raises(mint.MintError, match="not a POSIX time"):
        mint.Distributor(tmp_path, 1).next_time()


def test_distributor_max_wait_catches_a_clock_set_back(tmp_path):
    (tmp_path / mint.STATE_FILE).write_text("2000000000\n")
    clock = FakeClock(1287588115)
    distributor = mint.Distributor(tmp_path, 1, clock=clock, sleep=clock.sleep, max_wait=60)
    with pytest.raises(mint.MintError, match="clock set back"):
        distributor.next_time()
    assert clock.slept == []
    assert distributor.last() == 2000000000


def test_mint_and_deposit_refuse_to_sleep_through_a_clock_set_back(tmp_path, capsys):
    """The last date an hour ahead of the clock (set back by NTP, or a state_dir copied from
    a host whose clock ran ahead): mint slept the hour without a word, holding the locks."""
    from archive_service import cli

    (tmp_path / mint.STATE_FILE).write_text("1287591715\n")
    clock = FakeClock(1287588115)
    with pytest.raises(mint.MintError, match="clock set back"):
        mint.mint("mtc-m18.sid.inpe.br", state_dir=tmp_path, now=clock, sleep=clock.sleep)
    assert clock.slept == [] and (tmp_path / mint.STATE_FILE).read_text() == "1287591715\n"
    # A step's wait, and clocks of nodes a little apart, are still waited for.
    (tmp_path / mint.STATE_FILE).write_text("1287588174\n")  # 59 s ahead
    minted = mint.mint("mtc-m18.sid.inpe.br", state_dir=tmp_path, now=clock, sleep=clock.sleep)
    assert minted.time == 1287588175 and clock.slept == [Decimal(60)]
    # The command says so in one line (the real clock is far behind 2100).
    (tmp_path / mint.STATE_FILE).write_text("4102444800\n")
    argv = ["mint", "--host", "mtc-m18.sid.inpe.br", "--state-dir", str(tmp_path)]
    assert cli.main(argv) == 1
    assert "was the clock set back?" in capsys.readouterr().err
    from archive_service import deposit

    (tmp_path / "collection").mkdir()
    (tmp_path / "a.txt").write_text("x")
    config = {"collection": str(tmp_path / "collection"), "state_dir": str(tmp_path)}
    config["archiveaddress"] = "mtc-m18.sid.inpe.br"
    with pytest.raises(mint.MintError, match="clock set back"):
        deposit.deposit(config, [tmp_path / "a.txt"], now=clock, sleep=clock.sleep)
    assert os.listdir(tmp_path / "collection") == []


# --- mint ---


def test_mint_both_forms_of_the_seed_example(tmp_path):
    minted = mint.mint(
        "mtc-m18.sid.inpe.br",
        None,
        "150.163.34.243",
        "both",
        state_dir=tmp_path,
        now=lambda: 1234806360,
        sleep=pytest.fail,
    )
    assert minted.rep == "sid.inpe.br/mtc-m18/2009/02.16.17.46"
    assert minted.ibip == "8JMKD3MGP8W/34PGRBS"
    assert minted.time == 1234806360
    assert minted.forms().render() == (
        "{rep sid.inpe.br/mtc-m18/2009/02.16.17.46 ibip 8JMKD3MGP8W/34PGRBS}"
    )


def test_mint_one_form_and_an_explicit_port(tmp_path):
    clock = FakeClock("1287588115.3462")
    rep = mint.mint(
        "mtc-m18.sid.inpe.br",
        8080,
        state_dir=tmp_path,
        granularity="0.01",
        now=clock,
        sleep=clock.sleep,
    )
    assert rep.rep == "sid.inpe.br/mtc-m18.8080/2010/10.20.15.21.55.34"
    assert rep.ibip is None
    clock.now += Decimal("0.05")
    opaque = mint.mint(
        ip="2001:252:0:1::2008:6",
        port=8080,
        form="ibip",
        state_dir=tmp_path,
        granularity="0.01",
        now=clock,
        sleep=clock.sleep,
    )
    assert opaque.rep is None
    assert ibip.decode(opaque.ibip) == ibip.Decoded(
        "2001:252:0:1::2008:6",
        8080,
        datetime(2010, 10, 20, 15, 21, 55, tzinfo=UTC),
        Decimal("0.39"),
    )


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"form": "rep"}, "needs a host"),
        ({"form": "ibip", "host": "a.b"}, "needs an IP"),
        ({"form": "both", "host": "a.b"}, "needs an IP"),
        ({"form": "both", "host": "a_b.c", "ip": "10.0.0.1"}, "palavra"),
        ({"form": "ibip", "ip": "10.0.0.1", "port": 70000}, "1..65535"),
        ({"form": "word", "host": "a.b"}, "form must be one of"),
    ],
)
def test_mint_refuses_missing_or_bad_inputs_before_drawing_a_time(tmp_path, kwargs, error):
    with pytest.raises(ValueError, match=error):
        mint.mint(state_dir=tmp_path, **kwargs)
    assert not (tmp_path / mint.STATE_FILE).exists()


def test_minted_labels_parse(tmp_path):
    clock = FakeClock(1287587646)
    for _ in range(50):
        minted = mint.mint(
            "archive.example.org",
            8080,
            "192.0.2.7",
            "both",
            state_dir=tmp_path,
            granularity="0.1",
            now=clock,
            sleep=clock.sleep,
        )
        assert ibi.parse(minted.rep).kind == "rep"
        assert ibi.parse(minted.ibip).kind == "ibip"
        clock.now += Decimal("0.03")


def test_default_state_dir(monkeypatch, tmp_path):
    monkeypatch.setenv("STATE_DIRECTORY", f"{tmp_path}/a:{tmp_path}/b")
    assert mint.default_state_dir() == tmp_path / "a"
    monkeypatch.delenv("STATE_DIRECTORY")
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path))
    assert mint.default_state_dir() == tmp_path / "archive-service"


# --- two real processes at once ---

WORKER = """
import sys, time
from archive_service.deposit.mint import mint
state_dir, start, count = sys.argv[1], float(sys.argv[2]), int(sys.argv[3])
time.sleep(max(0.0, start - time.time()))
for _ in range(count):
    m = mint("mint.example.org", 8080, "192.0.2.7", "both", state_dir=state_dir,
             granularity="0.001")
    print(m.rep, m.ibip)
"""


@pytest.mark.process
@pytest.mark.slow
def test_two_processes_never_mint_the_same_label(tmp_path):
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    }
    start = time.time() + 1.0  # both interpreters are up by then, so they really compete
    workers = [
        subprocess.Popen(
            [sys.executable, "-c", WORKER, str(tmp_path), str(start), "500"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        for _ in range(2)
    ]
    outputs = []
    for worker in workers:
        out, err = worker.communicate(timeout=60)
        assert worker.returncode == 0, err
        outputs.append([line.split() for line in out.splitlines()])
    lines = [pair for output in outputs for pair in output]
    assert [len(output) for output in outputs] == [500, 500]
    assert len({rep for rep, _ in lines}) == 1000
    assert len({code for _, code in lines}) == 1000
    spans = []
    for output in outputs:  # each process sees its own labels in creation order
        times = [ibip.decode(code).timestamp for _, code in output]
        assert times == sorted(set(times))
        spans.append((times[0], times[-1]))
    (first_a, last_a), (first_b, last_b) = spans
    assert first_a < last_b and first_b < last_a, "the processes did not mint at the same time"
    for rep, code in lines:
        assert ibi.parse(rep).kind == "rep" and ibi.parse(code).kind == "ibip"
