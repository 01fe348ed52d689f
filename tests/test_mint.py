"""Repository names (ID Algorithms 1-3) and the temporal distributor (Algorithm 4, Table 6.2)."""

from datetime import datetime, timezone
from decimal import Decimal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from archive_service import ibip, mint
from archive_service.ibi import IbiError

UTC = timezone.utc


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
