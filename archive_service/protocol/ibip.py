"""The IBIp codec: IP, port and creation time <-> opaque IBI (ID§7, Algorithms 5-7).

An IBIp is `prefix "/" suffix` (ID Table 7.1):

- prefix (Algorithm 5): the IP's textual form read as a number — IPv4 in base 11 over
  `0123456789.` (ID Table 7.4), IPv6 in base 17 over `0123456789abcdef:` (ID Table 7.5) —
  written in base 27 (ID Table 7.6), then `W` (IPv4) or `X` (IPv6), then the port in base 27,
  or nothing when the port is 800.
- suffix (Algorithm 6): whole seconds since 807235200 (1995-08-01T00:00:00Z) in base 27; when
  the time has a fraction of a second, `W` and the encoded fraction.

Two choices the standard leaves open, fixed here so that `decode` is the exact inverse of
`encode`:

- IPv6 textual form: the one Python's `ipaddress` gives as `.compressed` on 3.11 — lower case,
  leading zeros dropped, the longest run (2+) of zero groups written `::`, and never a dotted
  IPv4 tail (`::ffff:1.2.3.4` is written `::ffff:102:304`). This is the form of ID Table 7.2's
  `2001:252:0:1::2008:6`.
- Fraction of a second: Algorithm 6 feeds the fraction (`data - parte-inteira`, e.g. 0.39) to
  ConverterDeDecimal, which converts integers. Reading its digits as an integer (39) would
  lose leading zeros (.039 and .39 both give 39), so the integer encoded is the digits behind
  a sentinel `1`: .39 -> 139 -> `76`, .039 -> 1039. Trailing zeros are not digits of the value
  (.390 is .39), so every fraction has exactly one encoding.

Addresses whose textual form starts with `0` (IPv4 `0.x.x.x`, IPv6 with a first group of 0
not written `::`) cannot be encoded: the leading 0 vanishes when the text is read as a number.
Both lie in blocks reserved for "this network", never a server's address.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal

from archive_service.protocol.ibi import IBIP_DIGITS, IbiError

IBIP_EPOCH = 807235200  # 1995-08-01T00:00:00Z, origin of the suffix (Algorithm 6, line 2)
IBIP_DEFAULT_PORT = 800  # the port Algorithm 5 leaves out of the prefix
IPV4_SEPARATOR = "W"
IPV6_SEPARATOR = "X"
FRACTION_SEPARATOR = "W"

IPV4_DIGITS = "0123456789."  # ID Table 7.4, values 0..10
IPV6_DIGITS = "0123456789abcdef:"  # ID Table 7.5, values 0..16

_UTC = UTC
_UNIX_EPOCH = datetime(1970, 1, 1, tzinfo=_UTC)
_STD_DIGITS = "0123456789abcdefghijklmnopqrstuvwxyz"  # what int(text, base) reads
_PREFIX_RE = re.compile(r"([^WX]*)([WX])(.*)", re.DOTALL)

TimeLike = Decimal | int | float | datetime


# --- base conversion (ConverterParaDecimal / ConverterDeDecimal, ID Tables 7.2-7.6) ---


def _to_digits(n: int, alphabet: str) -> str:
    """Write the integer `n` >= 0 in base len(alphabet) with the given digit symbols."""
    if not isinstance(n, int) or isinstance(n, bool) or n < 0:
        raise ValueError(f"only integers >= 0 can be converted, not {n!r}")
    base = len(alphabet)
    out = []
    while True:
        n, digit = divmod(n, base)
        out.append(alphabet[digit])
        if n == 0:
            return "".join(reversed(out))


def _from_digits(text: str, alphabet: str, what: str) -> int:
    """Read `text` as a number in base len(alphabet); IbiError names the first bad character."""
    if not text:
        raise IbiError(f"{what} is empty")
    for position, char in enumerate(text, 1):
        if char not in alphabet:
            raise IbiError(
                f"{what} {text!r}: character {char!r} at position {position} "
                f"is not one of the digits {alphabet!r}"
            )
    # int() does the arithmetic once the symbols are mapped onto the ones it reads.
    table = str.maketrans(alphabet, _STD_DIGITS[: len(alphabet)])
    try:
        return int(text.translate(table), len(alphabet))
    except ValueError:  # Python's limit of 4,300 digits: a plain ValueError, not an IbiError
        raise IbiError(f"{what} is too long ({len(text)} digits)") from None


def to_base27(n: int) -> str:
    """ConverterDeDecimal(n, decim-para-IBIp): `n` >= 0 in base 27 (ID Tables 7.3, 7.6)."""
    return _to_digits(n, IBIP_DIGITS)


def from_base27(text: str, what: str = "base-27 number") -> int:
    """ConverterParaDecimal over ID Table 7.6, case-insensitive (IBIp are, ID§7)."""
    return _from_digits(text.upper(), IBIP_DIGITS, what)


# --- IP addresses as numbers (ID Tables 7.2, 7.4, 7.5) ---


def ip_text(ip: str) -> str:
    """The textual form of `ip` that Algorithm 5 reads as a number (see module docstring)."""
    try:
        address = ipaddress.ip_address(ip)
    except ValueError as exc:
        raise IbiError(f"{ip!r} is not an IPv4 or IPv6 address ({exc})") from None
    if address.version == 4:
        text = address.compressed
    else:
        if address.scope_id:
            raise IbiError(f"{ip!r}: a scoped IPv6 address names no server outside its link")
        text = address.compressed
        if "." in text:
            # Python >= 3.13 writes IPv4-mapped addresses with a dotted tail; keep the 3.11
            # all-hex form so that labels do not depend on the Python version.
            head, _, dotted = text.rpartition(":")
            v4 = int(ipaddress.IPv4Address(dotted))
            text = f"{head}:{v4 >> 16:x}:{v4 & 0xFFFF:x}"
    if text.startswith("0"):
        raise IbiError(
            f"IP {ip!r} cannot be encoded: its text {text!r} starts with 0, which is lost "
            "when the text is read as a number (ID Table 7.2)"
        )
    return text


def ip_to_number(ip: str) -> int:
    """ConverterParaDecimal(IP, decim-para-IPv4|IPv6) of ID Table 7.2."""
    text = ip_text(ip)
    alphabet = IPV4_DIGITS if ipaddress.ip_address(text).version == 4 else IPV6_DIGITS
    return _from_digits(text, alphabet, "IP")


def number_to_ip(n: int, version: int) -> str:
    """The inverse of ip_to_number: IbiError unless `n` is the number of a canonical IP text."""
    alphabet = {4: IPV4_DIGITS, 6: IPV6_DIGITS}[version]
    text = _to_digits(n, alphabet)
    try:
        canonical = ip_text(text)
    except IbiError:
        canonical = None
    if canonical != text or ipaddress.ip_address(text).version != version:
        raise IbiError(
            f"number {n} reads {text!r} in IPv{version} digits, not an IPv{version} address"
        )
    return text


# --- times ---


def posix_time(t: TimeLike) -> Decimal:
    """A creation time as an exact Decimal of POSIX seconds.

    Floats are taken by their shortest repr (1287588012.293 stays .293, not the binary
    neighbour); datetimes must be timezone-aware.
    """
    if isinstance(t, bool):
        raise TypeError("a time cannot be a bool")
    if isinstance(t, datetime):
        if t.tzinfo is None:
            raise ValueError(f"naive datetime {t!r}: give a timezone (UTC)")
        return Decimal((t - _UNIX_EPOCH) // timedelta(microseconds=1)).scaleb(-6)
    if isinstance(t, float):
        return Decimal(repr(t))
    if isinstance(t, (int, Decimal)):
        return Decimal(t)
    raise TypeError(f"a time must be a Decimal, int, float or datetime, not {type(t).__name__}")


def fraction_digits(t: Decimal) -> str:
    """The decimal digits of the fraction of a second of `t` >= 0, no trailing zeros; '' if none."""
    fraction = t - int(t)
    if fraction == 0:
        return ""
    return format(fraction.normalize(), "f").partition(".")[2]


# --- Algorithms 5, 6, 7 ---


def _check_port(port: int) -> int:
    if not isinstance(port, int) or isinstance(port, bool) or not 1 <= port <= 65535:
        raise IbiError(f"port {port!r} is not an integer in 1..65535")
    return port


def encode_prefix(ip: str, port: int) -> str:
    """Algorithm 5 MontarPrefixoDoIBIpDeUmItem: IP digits, `W`|`X`, port digits ('' for 800)."""
    _check_port(port)
    text = ip_text(ip)
    separator = IPV4_SEPARATOR if ipaddress.ip_address(text).version == 4 else IPV6_SEPARATOR
    port_code = "" if port == IBIP_DEFAULT_PORT else to_base27(port)
    return to_base27(ip_to_number(text)) + separator + port_code


def encode_suffix(t: TimeLike) -> str:
    """Algorithm 6 MontarSufixoDoIBIpDeUmItem: seconds since 1995-08-01 [`W` fraction].

    The fraction is encoded as the integer `1` followed by its digits (module docstring).
    """
    t = posix_time(t)
    if t < IBIP_EPOCH:
        raise IbiError(f"time {t} is before 1995-08-01T00:00:00Z (POSIX {IBIP_EPOCH})")
    suffix = to_base27(int(t) - IBIP_EPOCH)
    digits = fraction_digits(t)
    if digits:
        suffix += FRACTION_SEPARATOR + to_base27(int("1" + digits))
    return suffix


def encode(ip: str, port: int, t: TimeLike) -> str:
    """Algorithm 7 MontarIBIpDeUmItem: encode_prefix(ip, port) "/" encode_suffix(t)."""
    return encode_prefix(ip, port) + "/" + encode_suffix(t)


# --- decoding ---


@dataclass(frozen=True)
class Decoded:
    """What an IBIp says: the minting server's IP and port and the creation time.

    `time` is whole seconds (UTC); `fraction` (0 <= fraction < 1) is the rest, exactly.
    """

    ip: str
    port: int
    time: datetime
    fraction: Decimal = Decimal(0)

    @property
    def timestamp(self) -> Decimal:
        """The exact POSIX time the IBIp was minted for (Algorithm 6's data-para-sufixo)."""
        return posix_time(self.time) + self.fraction


def _canonical_number(word: str, what: str) -> int:
    """from_base27, refusing the leading zero digits encode never writes."""
    word = word.upper()
    if len(word) > 1 and word[0] == IBIP_DIGITS[0]:
        raise IbiError(f"{what} {word!r}: leading zero digit {IBIP_DIGITS[0]!r} at position 1")
    return from_base27(word, what)


def decode_prefix(prefix: str) -> tuple[str, int]:
    """Inverse of Algorithm 5: (IP text, port)."""
    match = _PREFIX_RE.fullmatch(prefix.upper())
    if not match:
        raise IbiError(f"IBIp prefix {prefix!r} has no 'W' (IPv4) or 'X' (IPv6) after the IP")
    ip_code, separator, port_code = match.groups()
    if IPV4_SEPARATOR in port_code or IPV6_SEPARATOR in port_code:
        position = len(ip_code) + 2 + min(i for i, c in enumerate(port_code) if c in "WX")
        raise IbiError(f"IBIp prefix {prefix!r}: second separator at position {position}")
    version = 4 if separator == IPV4_SEPARATOR else 6
    ip = number_to_ip(_canonical_number(ip_code, "IBIp prefix IP"), version)
    if not port_code:
        return ip, IBIP_DEFAULT_PORT
    port = _canonical_number(port_code, "IBIp prefix port")
    if port == IBIP_DEFAULT_PORT:
        raise IbiError(f"IBIp prefix {prefix!r}: port 800 is written as nothing (Algorithm 5)")
    try:
        return ip, _check_port(port)
    except IbiError as exc:
        raise IbiError(f"IBIp prefix {prefix!r}: {exc}") from None


def decode_suffix(suffix: str) -> tuple[datetime, Decimal]:
    """Inverse of Algorithm 6: (UTC time in whole seconds, fraction of a second)."""
    seconds_code, separator, fraction_code = suffix.upper().partition(FRACTION_SEPARATOR)
    if FRACTION_SEPARATOR in fraction_code:
        position = len(seconds_code) + 2 + fraction_code.index(FRACTION_SEPARATOR)
        raise IbiError(f"IBIp suffix {suffix!r}: second 'W' at position {position}")
    seconds = _canonical_number(seconds_code, "IBIp suffix seconds")
    try:
        time = datetime.fromtimestamp(IBIP_EPOCH + seconds, _UTC)
    except (OverflowError, OSError, ValueError):
        # Its seconds as digits of their own: past 4,300 of them str() refuses (a ValueError).
        raise IbiError(
            f"IBIp suffix {suffix!r}: {len(seconds_code)} base-27 digits of seconds after "
            "1995-08-01 reach past year 9999"
        ) from None
    if not separator:
        return time, Decimal(0)
    fraction = _canonical_number(fraction_code, "IBIp suffix fraction")
    try:
        digits = str(fraction)
    except ValueError:  # over 4,300 decimal digits: str() refuses, as int() does
        raise IbiError(f"IBIp suffix {suffix!r}: fraction code is too long") from None
    if len(digits) < 2 or digits[0] != "1" or digits[-1] == "0":
        raise IbiError(
            f"IBIp suffix {suffix!r}: fraction code {fraction_code!r} is {digits}, not '1' "
            "followed by digits ending in 1-9"
        )
    return time, Decimal("0." + digits[1:])


def decode(ibip: str) -> Decoded:
    """Inverse of Algorithm 7: the IP, port and time an IBIp was minted from.

    Accepts any case; refuses (IbiError, naming the rule and character) anything `encode`
    would not have written, so that encode(*decode(x)) == x.upper().
    """
    parts = ibip.split("/")
    if len(parts) != 2:
        raise IbiError(f"IBIp {ibip!r} must be two words separated by '/'")
    try:
        ip, port = decode_prefix(parts[0])
        time, fraction = decode_suffix(parts[1])
    except IbiError as exc:
        raise IbiError(f"IBIp {ibip!r}: {exc}") from None
    return Decoded(ip, port, time, fraction)
