"""Minting new IBIs: repository names (ID§6, Algorithms 1-3) and the temporal distributor
(Algorithm 4) that gives every label of one identification subsystem its own creation time.

The IBIp side (Algorithms 5-7) lives in `archive_service.ibip`.
"""

from __future__ import annotations

from datetime import datetime, timezone
from decimal import Decimal, localcontext

from archive_service import ibi, ibip
from archive_service.ibi import IbiError

REP_DEFAULT_PORT = 80  # the port Algorithm 1 leaves out of the prefix
MINUTE = Decimal(60)

# Enough digits for POSIX seconds at any granularity down to 1e-30 s: Int() must be exact.
_PRECISION = 60


# --- repository names (Algorithms 1-3) ---


def rep_prefix(host: str, port: int = REP_DEFAULT_PORT) -> str:
    """Algorithm 1 MontarPrefixoDoNomeDeRepositórioDeUmItem.

    The first word of the (lower-cased) host name goes after the rest: `mtc-m18.sid.inpe.br`,
    80 -> `sid.inpe.br/mtc-m18`; any other port is appended with "." (the separator ID§6
    recommends; "@" is the pre-2010 one): 19050 -> `sid.inpe.br/mtc-m18.19050`.
    """
    if not isinstance(port, int) or isinstance(port, bool) or not 1 <= port <= 65535:
        raise IbiError(f"port {port!r} is not an integer in 1..65535")
    first, dot, subdomain = host.lower().partition(".")
    if not dot or not first or not subdomain:
        raise IbiError(f"host {host!r} must be a domain name of two or more words (ID Table 6.1)")
    word = first if port == REP_DEFAULT_PORT else f"{first}.{port}"
    prefix = f"{subdomain}/{word}"
    # Table 6.1 is checked where it is written down: on a whole name, with any valid suffix.
    try:
        ibi.check_rep(rep_name(prefix, "1995/08.01.00.00"))
    except IbiError as exc:
        raise IbiError(f"host {host!r} gives prefix {prefix!r}, which breaks ID Table 6.1 ({exc})") from None
    return prefix


def rep_suffix(t: ibip.TimeLike) -> str:
    """Algorithm 2 MontarSufixoDoNomeDeRepositórioDeUmItem: `YYYY/MM.DD.hh.mm` in UTC, then
    `.ss` when the second is not 00, or `.ss.fraction` whenever there is a fraction."""
    t = ibip.posix_time(t)
    if t < 0:
        raise IbiError(f"time {t} is before 1970-01-01T00:00:00Z")
    when = datetime.fromtimestamp(int(t), timezone.utc)
    suffix = when.strftime("%Y/%m.%d.%H.%M")
    fraction = ibip.fraction_digits(t)
    if fraction:
        suffix += when.strftime(".%S.") + fraction
    elif when.second != 0:
        suffix += when.strftime(".%S")
    return suffix


def rep_name(prefix: str, suffix: str) -> str:
    """Algorithm 3 MontarNomeDeRepositórioDeUmItem: prefix "/" suffix."""
    return f"{prefix}/{suffix}"


# --- the temporal distributor (Algorithm 4) ---


def as_granularity(r: Decimal | int | float | str) -> Decimal:
    """r as a Decimal, checked to be in G = {60, 1, 1/10, 1/100, ...} (ID§6)."""
    value = Decimal(repr(r)) if isinstance(r, float) else Decimal(r)
    if value == MINUTE:
        return MINUTE
    sign, digits, exponent = value.normalize().as_tuple()
    if not (sign == 0 and digits == (1,) and exponent <= 0):
        raise ValueError(f"granularity {r!r} is not 60, 1, 0.1, 0.01, ... seconds")
    return value.normalize()


def _plain(t: Decimal) -> Decimal:
    """t without trailing zeros or exponent: 1287588000, 1287588115.3 (for files and logs)."""
    return t.quantize(1) if t == t.to_integral_value() else t.normalize()


def _grid(t: Decimal, r: Decimal) -> Decimal:
    """r * Int(t / r): t rounded down onto the grid of step r."""
    return r * (t // r)


def distribute(
    current: Decimal | int | float,
    last: Decimal | None,
    r: Decimal | int | float | str,
) -> tuple[Decimal, Decimal]:
    """Algorithm 4 CriarDataParaMontarSufixoDoIBIDeUmItem, without its side effects.

    `current` is the request time (data-corrente), `last` the previous output (última-data-
    para-sufixo, None for the first request), `r` the granularity. Returns (data-para-sufixo,
    atraso): the date for the suffix, and how long the caller must wait before using it,
    since the creation date (data-de-criação) may lie up to `r` ahead of `current` (line 7).
    The date for the suffix is the shortest grid point (minute, second, tenth, ...) after
    `last` that is not after the creation date (lines 8-15), and becomes the next `last`.
    """
    r = as_granularity(r)
    current = ibip.posix_time(current)
    with localcontext(prec=_PRECISION):
        rounded = _grid(current, r)  # line 1
        if last is None:  # lines 2-3
            last = rounded - r
        last = _grid(ibip.posix_time(last), r)  # line 4: r may have changed since last time
        creation = max(last + r, rounded)  # line 5
        wait = max(creation - current, Decimal(0))  # lines 6-7
        short, s, t = creation, r, creation  # lines 8-9
        while last < short:  # lines 10-15
            s = MINUTE if s * 10 == 10 else s * 10
            t = short
            if s > MINUTE:
                break
            short = _grid(creation, s)
        return _plain(t), wait  # lines 16-17
