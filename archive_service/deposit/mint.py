"""Minting new IBIs: repository names (ID§6, Algorithms 1-3) and the temporal distributor
(Algorithm 4) that gives every label of one identification subsystem its own creation time.

The IBIp side (Algorithms 5-7) lives in `archive_service.protocol.ibip`; `mint` draws one time
from the distributor and builds either form, or both, from it.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal, localcontext
from pathlib import Path

from archive_service import settings
from archive_service.protocol import ibi, ibip
from archive_service.protocol.ibi import IbiError
from archive_service.stores import mint as mint_state
from archive_service.stores.mint.file import LOCK_FILE, STATE_FILE  # noqa: F401 (their names here)

REP_DEFAULT_PORT = 80  # the port Algorithm 1 leaves out of the prefix
MINUTE = Decimal(60)


# Enough digits for POSIX seconds at any granularity down to 1e-30 s: Int() must be exact.
_PRECISION = 60


class MintError(RuntimeError):
    """Minting cannot go on safely (unreadable distributor state, wait beyond the limit)."""


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
        raise IbiError(
            f"host {host!r} gives prefix {prefix!r}, which breaks ID Table 6.1 ({exc})"
        ) from None
    return prefix


def rep_suffix(t: ibip.TimeLike) -> str:
    """Algorithm 2 MontarSufixoDoNomeDeRepositórioDeUmItem: `YYYY/MM.DD.hh.mm` in UTC, then
    `.ss` when the second is not 00, or `.ss.fraction` whenever there is a fraction."""
    t = ibip.posix_time(t)
    if t < 0:
        raise IbiError(f"time {t} is before 1970-01-01T00:00:00Z")
    when = datetime.fromtimestamp(int(t), UTC)
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


class Distributor:
    """Algorithm 4 for one identification subsystem, over the state every process using it
    shares (stores/mint/: `state_dir/mint-last-date` under `state_dir/mint.lock` by default,
    or `store`, e.g. the database's). Each `next_time()` holds the state's lock from reading
    the last date, through the wait, to keeping the new one, so labels never repeat across
    processes, nodes and restarts.

    `max_wait` bounds the wait (None: no bound): a clock set back makes Algorithm 4 wait
    until it passes the last date again, which a caller may prefer to see as a MintError.
    """

    def __init__(
        self,
        state_dir: str | os.PathLike[str],
        granularity: Decimal | int | float | str = 1,
        *,
        clock: Callable[[], Decimal | int | float] = time.time,
        sleep: Callable[[float], object] = time.sleep,
        max_wait: float | None = None,
        store: mint_state.MintState | None = None,
    ) -> None:
        self.state_dir = Path(state_dir)
        self.granularity = as_granularity(granularity)
        self.clock = clock
        self.sleep = sleep
        self.max_wait = max_wait
        self.store = store if store is not None else mint_state.open_state(state_dir)

    def last(self) -> Decimal | None:
        """The last date handed out, or None before the first one."""
        try:
            return self.store.last()
        except mint_state.StateError as exc:
            raise MintError(str(exc)) from None

    def next_time(self) -> Decimal:
        """The creation time (data-para-sufixo) of a new label, distinct from all before it."""
        try:
            with self.store.held() as held:
                t = self._draw(held.last)
                held.keep(t)
        except mint_state.StateError as exc:
            raise MintError(str(exc)) from None
        return t

    def _draw(self, last: Decimal | None) -> Decimal:
        """Algorithm 4 after `last`, waiting until its date has come (under the caller's lock)."""
        t, wait = distribute(self.clock(), last, self.granularity)
        if wait > 0:
            if self.max_wait is not None and wait > self.max_wait:
                raise MintError(
                    f"the next label's date is {wait} s ahead of the clock "
                    f"(limit {self.max_wait} s): was the clock set back?"
                )
            self.sleep(float(wait))
        return t


# --- minting ---


@dataclass(frozen=True)
class Minted:
    """A new IBI: its repository name and/or IBIp, both from the same creation `time`."""

    time: Decimal
    rep: str | None = None
    ibip: str | None = None

    def forms(self) -> ibi.Forms:
        """The forms as responses write them (§7, Table 7.4)."""
        return ibi.Forms(rep=self.rep, ibip=self.ibip)


def default_state_dir() -> Path:
    """The state_dir setting's default (settings.default_state_dir)."""
    return Path(settings.default_state_dir())


FORMS = ("rep", "ibip", "both")

# The most `mint` waits beyond one granularity step (Algorithm 4 waits at most one step while
# the clock goes forward; nodes sharing the database may differ by a little). Unbounded, a
# clock set back an hour made `mint`, `deposit` and `import` sleep an hour without a word,
# holding the minting and deposit locks, so every other deposit waited too.
CLOCK_SLACK = 60.0


def mint(
    host: str | None = None,
    port: int | None = None,
    ip: str | None = None,
    form: str = "rep",
    *,
    state_dir: str | os.PathLike[str] | None = None,
    granularity: Decimal | int | float | str = 1,
    now: Callable[[], Decimal | int | float] = time.time,
    sleep: Callable[[float], object] = time.sleep,
    database: str = "",
    max_wait: float | None = None,
) -> Minted:
    """Mint a new IBI of the identification subsystem (host or IP, port).

    - form 'rep' needs `host` (the server's domain name, two or more words) and `port`
      (default 80, which the name omits): Algorithms 1-3.
    - form 'ibip' needs `ip` (IPv4 or IPv6) and `port` (default 800, which the IBIp omits):
      Algorithms 5-7.
    - form 'both' needs `host`, `ip` and `port`; with port None each form takes its own
      default (80 and 800).

    The time comes from `Distributor(state_dir, granularity, clock=now, sleep=sleep)`
    (state_dir default: `default_state_dir()`), or with `database` (the setting) from the
    state every node shares (stores/mint/postgres.py), so it may wait up to `granularity` seconds;
    a test that fakes `now` must fake `sleep` too, or the clock never catches up. A wait
    longer than `max_wait` (default: one step and CLOCK_SLACK seconds), the clock set back, is
    a MintError and draws nothing. Every label is
    checked with `archive_service.protocol.ibi.parse`; bad inputs raise IbiError before any
    time is drawn.
    """
    if form not in FORMS:
        raise ValueError(f"form must be one of {FORMS}, not {form!r}")
    wants_rep, wants_ibip = form in ("rep", "both"), form in ("ibip", "both")
    rep_pre = ibip_pre = None
    if wants_rep:
        if host is None:
            raise IbiError(f"form {form!r} needs a host name")
        rep_pre = rep_prefix(host, REP_DEFAULT_PORT if port is None else port)
    if wants_ibip:
        if ip is None:
            raise IbiError(f"form {form!r} needs an IP address")
        ibip_pre = ibip.encode_prefix(ip, ibip.IBIP_DEFAULT_PORT if port is None else port)
    directory = default_state_dir() if state_dir is None else state_dir
    if max_wait is None:
        max_wait = float(as_granularity(granularity)) + CLOCK_SLACK
    forms = [f"rep:{rep_pre}"] if rep_pre else []
    forms += [f"ibip:{ibip_pre}"] if ibip_pre else []
    distributor = Distributor(
        directory,
        granularity,
        clock=now,
        sleep=sleep,
        max_wait=max_wait,
        store=mint_state.open_state(directory, database, forms),
    )
    t = distributor.next_time()
    minted = Minted(
        time=t,
        rep=rep_name(rep_pre, rep_suffix(t)) if rep_pre else None,
        ibip=f"{ibip_pre}/{ibip.encode_suffix(t)}" if ibip_pre else None,
    )
    for kind, label in (("rep", minted.rep), ("ibip", minted.ibip)):
        # By construction (Algorithms 3 and 7) this holds; a host that breaks Table 6.1
        # (a word with "_", an IP literal) is caught here rather than handed out.
        if label is not None and ibi.parse(label).kind != kind:
            raise IbiError(f"minted {label!r} does not parse as a {kind}")
    return minted
