"""IBIp codec (ID§7, Algorithms 5-7): the seed's known values, errors, and round trips."""

import ipaddress
from datetime import UTC, datetime
from decimal import Decimal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from archive_service.protocol import ibi, ibip
from archive_service.protocol.ibi import IbiError

UTC = UTC


# --- ID Tables 7.2 and 7.3 ---


@pytest.mark.parametrize(
    ("n", "text"),
    [
        (0, "2"),
        (1, "3"),
        (19050, "U5H"),
        (480992662, "38G3TS3"),
        (4588904456580, "J8LNKAN8P"),
        (478239719325051908572237, "7URMDHLL9SSN2D89M"),
    ],
)
def test_base27_table_7_3(n, text):
    assert ibip.to_base27(n) == text
    assert ibip.from_base27(text) == n
    assert ibip.from_base27(text.lower()) == n


def test_from_base27_names_the_bad_character():
    with pytest.raises(IbiError, match=r"character '0' at position 2"):
        ibip.from_base27("304")


def test_to_base27_refuses_negative():
    with pytest.raises(ValueError):
        ibip.to_base27(-1)


@pytest.mark.parametrize(
    ("ip", "n"),
    [("150.163.2.174", 4588904456580), ("2001:252:0:1::2008:6", 478239719325051908572237)],
)
def test_ip_to_number_table_7_2(ip, n):
    assert ibip.ip_to_number(ip) == n
    assert ibip.number_to_ip(n, ipaddress.ip_address(ip).version) == ip


def test_ipv6_is_read_in_its_compressed_lower_case_form():
    spelled_out = "2001:0252:0000:0001:0000:0000:2008:0006".upper()
    assert ibip.ip_to_number(spelled_out) == 478239719325051908572237


def test_ipv4_mapped_ipv6_is_written_in_hex():
    assert ibip.ip_text("::ffff:1.2.3.4") == "::ffff:102:304"


@pytest.mark.parametrize(
    "ip", ["0.1.2.3", "0:1:2:3:4:5:6:7", "fe80::1%eth0", "example.org", "1.2.3"]
)
def test_ips_that_cannot_be_encoded(ip):
    with pytest.raises(IbiError):
        ibip.encode_prefix(ip, 800)


# --- Algorithms 5-7 and their inverse: the seed's IBIp ---


def test_encode_example_2():
    assert ibip.encode("150.163.34.243", 800, 1234806360) == "8JMKD3MGP8W/34PGRBS"


def test_port_other_than_800_follows_the_separator():
    assert ibip.encode_prefix("150.163.2.174", 19050) == "J8LNKAN8PWU5H"
    assert ibip.encode_prefix("2001:252:0:1::2008:6", 800) == "7URMDHLL9SSN2D89MX"


@pytest.mark.parametrize(
    ("text", "ip", "when"),
    [
        ("8JMKD3MGP7W/3EPGUE5", "150.163.34.242", datetime(2013, 9, 4, 12, 27, 57, tzinfo=UTC)),
        ("LK47B6W/362SFKH", "127.0.0.1", datetime(2009, 9, 9, 22, 1, tzinfo=UTC)),
        ("8JMKD3MGP8W/34PGRBS", "150.163.34.243", datetime(2009, 2, 16, 17, 46, tzinfo=UTC)),
    ],
)
def test_decode_seed_ibip(text, ip, when):
    decoded = ibip.decode(text)
    assert decoded == ibip.Decoded(ip, 800, when, Decimal(0))
    assert ibip.decode(text.lower()) == decoded
    assert ibip.encode(decoded.ip, decoded.port, decoded.time) == text


@pytest.mark.parametrize(
    ("text", "rep"),
    [
        ("8JMKD3MGP8W/35MME4E", "sid.inpe.br/mtc-m18@80/2009/07.21.13.23"),
        ("8JMKD3MGP8W/35MMLL8", "sid.inpe.br/mtc-m18@80/2009/07.21.14.43"),
        ("8JMKD3MGP8W/3C9EP6P", "sid.inpe.br/mtc-m18/2012/07.12.18.08"),
    ],
)
def test_seed_ibip_decode_to_the_time_of_their_repository_name(text, rep):
    # Computed, and exact to the second: each IBIp was minted with its repository name.
    decoded = ibip.decode(text)
    assert (decoded.ip, decoded.port, decoded.fraction) == ("150.163.34.243", 800, 0)
    assert decoded.time.strftime("%Y/%m.%d.%H.%M") == rep.split("/", 2)[2]
    assert decoded.time.second == 0


# --- fractions of a second (Algorithm 6, lines 3 and 5-7) ---


@pytest.mark.parametrize(
    ("fraction", "code"),
    [("0.39", "76"), ("0.390", "76"), ("0.039", "3DF"), ("0.5", "H"), ("0.000001", "3RPN4")],
)
def test_fraction_is_the_sentinel_1_then_its_digits(fraction, code):
    t = Decimal(1234806360) + Decimal(fraction)
    assert ibip.encode_suffix(t) == "34PGRBSW" + code
    assert ibip.to_base27(int("1" + fraction[2:].rstrip("0"))) == code
    assert ibip.decode("LK47B6W/34PGRBSW" + code).fraction == Decimal(fraction)


def test_float_times_keep_their_written_digits():
    assert ibip.encode_suffix(1287588012.293) == ibip.encode_suffix(Decimal("1287588012.293"))


def test_decoded_timestamp_is_exact():
    t = Decimal("1287587646.394023")
    assert ibip.decode(ibip.encode("10.0.0.1", 8080, t)).timestamp == t


def test_times_before_the_ibip_epoch_are_refused():
    with pytest.raises(IbiError, match="1995-08-01"):
        ibip.encode_suffix(807235199)
    assert ibip.encode_suffix(807235200) == "2"


def test_naive_datetime_is_refused():
    with pytest.raises(ValueError, match="naive"):
        ibip.encode_suffix(datetime(2010, 1, 1))


# --- decode errors say which rule failed and where ---


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("8JMKD3MGP7W", "two words"),
        ("8JMKD3MGP7/3EPGUE5", r"no 'W' \(IPv4\) or 'X' \(IPv6\)"),
        ("8JMKD3MGP7W/3EP0UE5", r"character '0' at position 4"),
        ("28JMKD3MGP7W/3EPGUE5", "leading zero digit '2'"),
        ("8JMKD3MGP7WX/3EPGUE5", "second separator at position 12"),
        ("8JMKD3MGP7W/3W3W4", "second 'W' at position 4"),
        ("8JMKD3MGP7W/3W", "fraction is empty"),
        ("8JMKD3MGP7W/3W2", r"not '1' followed by digits"),
        ("8JMKD3MGP7W/3WB", r"not '1' followed by digits"),  # B is 9: no sentinel
        ("8JMKD3MGP7W/3W64", r"not '1' followed by digits"),  # 110: .10 is written .1
        ("8JMKD3MGP7X/3", "not an IPv6 address"),
        ("3W/3", "not an IPv4 address"),
        ("LK47B6W34K/3", "port 800 is written as nothing"),
        ("LK47B6WUUUU/3", r"port 531440 is not an integer in 1\.\.65535"),
        ("W/3", "IP is empty"),
    ],
)
def test_decode_errors(text, message):
    with pytest.raises(IbiError, match=message):
        ibip.decode(text)


# --- properties ---

ipv4 = st.ip_addresses(v=4).filter(lambda a: not str(a).startswith("0"))
ipv6 = st.ip_addresses(v=6).filter(lambda a: not ibip_unencodable(a))
ports = st.integers(1, 65535)
whole_seconds = st.integers(ibip.IBIP_EPOCH, int(datetime(2100, 1, 1, tzinfo=UTC).timestamp()))
fractions = st.integers(0, 6).flatmap(
    lambda places: st.integers(0, 10**places - 1).map(lambda n: Decimal(n).scaleb(-places))
)
times = st.builds(lambda s, f: Decimal(s) + f, whole_seconds, fractions)


def ibip_unencodable(address) -> bool:
    try:
        ibip.ip_text(str(address))
    except IbiError:
        return True
    return False


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(address=st.one_of(ipv4, ipv6), port=ports, t=times)
def test_encode_decode_round_trip(address, port, t):
    text = ibip.encode(str(address), port, t)
    assert ibi.parse(text).kind == "ibip"
    decoded = ibip.decode(text)
    assert ipaddress.ip_address(decoded.ip) == address
    assert decoded.port == port
    assert decoded.timestamp == t
    assert ibip.encode(decoded.ip, decoded.port, decoded.timestamp) == text


@settings(max_examples=200, deadline=None)
@given(n=st.integers(0, 2**140))
def test_base27_round_trip(n):
    text = ibip.to_base27(n)
    assert set(text) <= set(ibi.IBIP_DIGITS)
    assert ibip.from_base27(text) == n
