"""The registry of Archives (§5): registration keys, inclusion and exclusion, in SQLite, or in
PostgreSQL when the resolver's `database` names it (several resolver instances on one
registry).

Registering (§5.1) is the administrator's step: the Archive's service IBI and its key. The
key is kept only as a salted scrypt hash. Inclusion (§5.2) checks the key, calls the Archive
back, records where it is, and answers `status.archive included status.confirmation
successful|unsuccessful` (the Archive is included either way, as the seed says; the
confirmation result is kept). Exclusion answers `status.archive excluded`; the registration
stays, so the Archive is included again when it comes back, possibly at a new address.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import logging
import math
import os
import re
import threading
import time
from collections.abc import Callable, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime

from .. import settings
from ..common import net
from ..protocol import ibi as ibimod
from ..protocol.answers import RequestError
from .resolve import ArchiveRef
from .stores.registry import RegistryError, open_registry  # noqa: F401 (callers catch it here)

log = logging.getLogger(__name__)

_KEY_RE = re.compile(r"[0-9]{10,}(?:-[0-9]{10,})?")  # Table 5.1
# scrypt at n=2**14, r=8: about 16 MiB and tens of milliseconds per check, paid only on
# inclusion and exclusion.
_SCRYPT = {"n": 2**14, "r": 8, "p": 1, "dklen": 32}
INCLUSION, EXCLUSION = "inclusionRequest", "exclusionRequest"


def _protocol(value: str) -> str:
    if value != "HTTP":
        raise ValueError("must be HTTP, the one protocol of the recommendation")
    return value


# Table 5.2: every pair is required; each value's rule, reusing the Archive's own checks.
_PAIRS: dict[str, Callable[[str], str]] = {
    "archiveaddress": settings.hostport,
    "archiveserviceibi": settings.ibi_text,
    "archiveip": settings.ip_address,
    "archiveprotocol": _protocol,
    "archiveplatformversion": settings.ascii_text,
    "archiveadmemailaddress": settings.email_address,
    "registrationkey": settings.registration_key,
}


class Refused(Exception):
    """An inclusion or exclusion with an unknown Archive or a wrong key (HTTP 403)."""


class Throttled(Refused):
    """Too many refused key checks from one source: HTTP 429, answered before any scrypt."""

    def __init__(self, message: str, retry_after: float):
        super().__init__(message)
        self.retry_after = retry_after


# Refused key checks from all sources together, per worker: two sources' bursts at once (one
# alone cannot use it up), then one a second (6 % of a core in scrypt). A source is an
# address, an IPv6 /64: one host given a /48 (a tunnel broker's, free) is 65,536 sources, and
# 16 clients each from a new /64 ran a scrypt per request, never refused: other users'
# resolutions p50 6.5 -> 310 ms (the eighth adversarial pass). Past it, every key check
# waits, a right one too: an announcer tries again later.
ANY_SOURCE, ANY_BURST, ANY_RATE = "any source", 20, 1.0
# Requests with an Archive's right key, per Archive, at once; then one every 1/RATE seconds (an
# announcer includes at start, on a reload and when a node takes over: a few an hour).
ACCEPTED_BURST = 20
# How long an excluded Archive still holds the IBIs it is remembered for (a restart, an
# upgrade): its readers get a 404 meanwhile, not whoever else claims them. Longer away, it
# routes nothing (resolve.ask_round) until it is back or its owners' grace ends.
EXCLUDED_GRACE = 3600


class KeyThrottle:
    """A token bucket per source address for key checks (scrypt: ~50 ms of CPU and 16 MiB
    each). A check takes a token before scrypt runs and gives it back when the key was right,
    so only refused checks use the bucket: a source gets BURST of them at once, then one
    every 1/RATE seconds; past that it is answered 429 at once, whatever key it sends.
    IPv6 sources count by /64 (one host may hold all of it). Kept in each worker's memory:
    with N workers a source gets up to N times as many. `Registry.accepted` is another, per
    Archive, charged for right keys only, looked at (`wait`) before scrypt and taken
    after it: those sent together past it are refused there, before any write or confirmation."""

    BURST = 10
    RATE = 1 / 10  # refused checks per second once the burst is used: 6 a minute
    MAX_SOURCES = 10_000  # forget the fullest buckets first beyond this

    def __init__(
        self, clock: Callable[[], float] = time.monotonic, burst: int = BURST, rate: float = RATE
    ):
        self._clock = clock
        self.burst, self.rate = burst, rate
        self._lock = threading.Lock()
        self._buckets: dict[str, tuple[float, float]] = {}  # source: (tokens, at)

    def wait(self, address: str) -> float:
        """The seconds until `address` may take a token (0: now), none taken."""
        source, now = self._source(address), self._clock()
        with self._lock:
            tokens = self._tokens(source, now)
        return 0.0 if tokens >= 1 else (1 - tokens) / self.rate

    def _tokens(self, source: str, now: float) -> float:
        """The tokens `source` has now, refilled since it last took one (under the lock)."""
        tokens, at = self._buckets.get(source, (self.burst, now))
        return min(self.burst, tokens + (now - at) * self.rate)

    @staticmethod
    def _source(address: str) -> str:
        try:
            ip = ipaddress.ip_address(address)
        except ValueError:
            return address
        if ip.version == 6:
            if ip.ipv4_mapped:
                return str(ip.ipv4_mapped)
            return str(ipaddress.ip_network(f"{ip}/64", strict=False))
        return str(ip)

    def take(self, address: str) -> float:
        """0 when a check may run (a token is taken), else the seconds until one may."""
        source, now = self._source(address), self._clock()
        with self._lock:
            tokens = self._tokens(source, now)
            if tokens < 1:
                self._buckets[source] = (tokens, now)
                return (1 - tokens) / self.rate
            self._buckets[source] = (tokens - 1, now)
            if len(self._buckets) > self.MAX_SOURCES:
                # Refilled as of now, and never the source just charged: comparing the stored
                # tokens forgot that source at once (9 left), so past MAX_SOURCES sources that
                # had spent two checks each, any new source had unlimited scrypt checks.
                for full in [
                    k
                    for k, (t, at) in self._buckets.items()
                    if k != source and t + (now - at) * self.rate >= self.burst - 1
                ]:
                    del self._buckets[full]
            return 0.0

    def give_back(self, address: str) -> None:
        source = self._source(address)
        with self._lock:
            if source in self._buckets:
                tokens, at = self._buckets[source]
                self._buckets[source] = (min(self.burst, tokens + 1), at)


@dataclass(frozen=True)
class Record:
    serviceibi: str
    registered: str
    included: bool
    since: str | None
    address: str | None
    ip: str | None
    platformversion: str | None
    email: str | None
    confirmation: str | None
    sends_from: str | None = None  # networks, space-separated (`register --from`)

    @property
    def ref(self) -> ArchiveRef:
        return ArchiveRef(self.address or "", self.serviceibi, self.ip or "")


def _epoch(stamp: str | None) -> float:
    """A registry time (`_now`'s form) in epoch seconds; none or unreadable: long ago."""
    try:
        return datetime.strptime(stamp or "", "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC).timestamp()
    except ValueError:
        return 0.0


def _host(address: str | None) -> str:
    """The host of an `archiveaddress` ("" when none or unreadable)."""
    try:
        return net.host_port(address or "")[0]
    except ValueError:
        return ""


def _sends_from(record: Record) -> tuple:
    """The networks an Archive's inclusion and exclusion requests may come from unheld by the
    all-sources bucket: the addresses it was last included at (its archiveip, its
    archiveaddress when an address), each given with its right key, and the networks its
    admin named when it was registered (`register --from`: before its first inclusion, or
    after a move)."""
    found = [net.address(record.ip or ""), net.address(_host(record.address))]
    nets = [ipaddress.ip_network(a) for a in found if a is not None]
    for text in (record.sends_from or "").split():
        try:
            nets.append(ipaddress.ip_network(text))
        except ValueError:
            continue  # written by register, which checks it: never so
    return tuple(nets)


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _hash(key: str, salt: bytes) -> bytes:
    return hashlib.scrypt(key.encode("ascii"), salt=salt, maxmem=64 << 20, **_SCRYPT)


def _too_many(serviceibi: str, wait: float) -> Throttled:
    """The refusal of a request past the Archive's own bucket (`Registry.accepted`)."""
    return Throttled(
        f"too many inclusion and exclusion requests for {serviceibi}: "
        f"try again in {math.ceil(wait)} s",
        wait,
    )


@dataclass(frozen=True)
class _Included:
    """One thread's copy of the included Archives (`Registry._included`)."""

    version: tuple
    refs: list[ArchiveRef]
    keyed: dict[str, ArchiveRef]
    excluded: dict[str, float]  # the excluded ones by key: when (epoch seconds)
    # Every registered Archive by key: the networks it sends from (`_sends_from`).
    announced: dict[str, tuple]


class Registry:
    """The registered Archives, in `state_dir` (SQLite) or in the `database` (PostgreSQL)."""

    def __init__(self, state_dir: str | os.PathLike | None, database: str = ""):
        self.throttle = KeyThrottle()
        self.everyone = KeyThrottle(burst=ANY_BURST, rate=ANY_RATE)  # `throttle`'s sum
        # Right keys, per Archive: a registered Archive's own key made each request cost
        # scrypt (61 ms of CPU) and a confirmation, without bound (issue 30's second
        # adversarial pass). Charged only once its key was right, so no one else uses it up.
        self.accepted = KeyThrottle(burst=ACCEPTED_BURST)
        self._kept = threading.local()  # per thread: an `_Included`
        self._store = open_registry(state_dir, database)
        if not database:
            self.path = self._store.path
        self.where = self._store.where

    @contextmanager
    def _db(self):
        """One session: `run(sql, params)` gives rows as dicts (SQL written with ? and the
        table as {table})."""
        with self._store.session() as run:
            yield lambda sql, params=(): run(sql.format(table=self._store.table), params)

    def register(
        self, serviceibi: str, key: str, sends_from: tuple[str, ...] | None = None
    ) -> bool:
        """Register (or re-key) an Archive; True if it is new. The key itself is not kept.
        `sends_from`: the networks its admin says it sends its inclusion and exclusion
        requests from (None keeps what was given before): from them it is not held by the
        all-sources key bucket before its first inclusion either (`_take`)."""
        ibi = ibimod.parse(serviceibi).text
        if not _KEY_RE.fullmatch(key):
            raise ValueError(
                "a registration key is 10 or more digits, optionally '-' and "
                "10 or more digits (Table 5.1)"
            )
        froms = None if sends_from is None else " ".join(sends_from)
        salt = os.urandom(16)
        with self._db() as run:
            new = not run("SELECT 1 FROM {table} WHERE ibikey = ?", (ibimod.key(ibi),))
            run(
                "INSERT INTO {table} (ibikey, serviceibi, salt, keyhash, registered, sends_from) "
                "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT(ibikey) DO UPDATE SET "
                "salt = excluded.salt, keyhash = excluded.keyhash, "
                "registered = excluded.registered, "
                "sends_from = coalesce(excluded.sends_from, {table}.sends_from)",
                (ibimod.key(ibi), ibi, salt, _hash(key, salt), _now(), froms),
            )
        return new

    def check_key(self, serviceibi: str, key: str) -> bool:
        with self._db() as run:
            rows = run(
                "SELECT salt, keyhash FROM {table} WHERE ibikey = ?", (ibimod.key(serviceibi),)
            )
        if not rows:
            _hash(key, b"\0" * 16)  # the same work, so timing does not tell who is registered
            return False
        return hmac.compare_digest(_hash(key, bytes(rows[0]["salt"])), bytes(rows[0]["keyhash"]))

    def records(self, included_only: bool = False) -> list[Record]:
        """Archives in the order they were registered (the order urlRequests are sent in)."""
        sql = (
            "SELECT serviceibi, registered, included, since, address, ip, platformversion, "
            "email, confirmation, sends_from FROM {table}"
        )
        if included_only:
            sql += " WHERE included = 1"
        with self._db() as run:
            rows = run(sql + f" ORDER BY {self._store.order}")
        return [Record(**{**row, "included": bool(row["included"])}) for row in rows]

    def included(self) -> list[ArchiveRef]:
        """The included Archives, in the order they were registered."""
        return self._included().refs

    def included_keyed(self) -> Mapping[str, ArchiveRef]:
        """The included Archives by the key of their service IBI (`ibi.key`), in the same
        order: a resolution picks the few it remembers without going through them all."""
        return self._included().keyed

    def lately_excluded(self, key: str) -> bool:
        """Whether the Archive whose service IBI has `key` was excluded less than
        EXCLUDED_GRACE ago. serve's stop sends an exclusionRequest (SPEC §5), so each restart
        of an Archive excludes it for seconds: what it is remembered for must not go to
        whoever claims it meanwhile (issue 30, the eleventh adversarial pass)."""
        since = self._included().excluded.get(key)
        return since is not None and time.time() - since < EXCLUDED_GRACE

    def _included(self) -> _Included:
        """This thread's copy, read again only when the store's `version` changed (in SQLite
        every write goes through a connection of its own, so it bumps it)."""
        version = self._store.version()
        kept: _Included | None = getattr(self._kept, "included", None)
        if kept is None or kept.version != version:
            records = self.records()
            refs = [r.ref for r in records if r.included]
            excluded = {
                ibimod.key(r.serviceibi): _epoch(r.since) for r in records if not r.included
            }
            announced = {ibimod.key(r.serviceibi): _sends_from(r) for r in records}
            kept = _Included(
                version, refs, {ibimod.key(r.serviceibi): r for r in refs}, excluded, announced
            )
            self._kept.included = kept
        return kept

    # -- §5.2 messages ------------------------------------------------------------------

    def _take(self, source: str, archive_key: str) -> bool:
        """A token for a key check from `source` and from all sources, or Throttled; True
        when the all-sources one was taken. An Archive sending from an address it was
        included at needs none of the latter: wrong keys from many sources (about one a
        second a worker) kept it empty, so a restarting Archive was refused (429) its
        inclusion for as long as they came, and its readers got 404s (issue 30, the twelfth
        adversarial pass). That source has its own bucket still."""
        if wait := self.throttle.take(source):
            raise Throttled(
                f"too many refused inclusion and exclusion requests from {source}: "
                f"try again in {math.ceil(wait)} s",
                wait,
            )
        if wait := self.everyone.take(ANY_SOURCE):
            found = net.address(source)
            if found and net.within(found, self._included().announced.get(archive_key, ())):
                return False
            self.throttle.give_back(source)
            raise Throttled(
                "too many refused inclusion and exclusion requests from all sources: "
                f"try again in {math.ceil(wait)} s",
                wait,
            )
        return True

    def _give_back(self, source: str, everyone: bool) -> None:
        self.throttle.give_back(source)
        if everyone:
            self.everyone.give_back(ANY_SOURCE)

    def handle(
        self,
        query: Mapping[str, str],
        confirm: Callable[[ArchiveRef], bool],
        is_self: Callable[[str], bool] = lambda address: False,
        source: str | None = None,
    ) -> list[tuple[str, str]]:
        """Answer an inclusionRequest or exclusionRequest (Table 5.2) with its status pairs.

        `is_self(archiveaddress)`: whether that address is the resolver's own; an Archive
        included there would make every resolution ask the resolver again. `source`: the
        address the request came from, for `KeyThrottle` (None: not throttled)."""
        subject = query.get("servicesubject")
        if not subject:
            raise RequestError("servicesubject is missing")
        if subject not in (INCLUSION, EXCLUSION):
            raise RequestError(
                f"unknown servicesubject {subject}: this resolver answers "
                f"{INCLUSION} and {EXCLUSION}"
            )
        values = {}
        for name, rule in _PAIRS.items():
            raw = query.get(name)
            if not raw:
                raise RequestError(f"{subject} needs {name} (Table 5.2)")
            try:
                values[name] = rule(raw)
            except ValueError as exc:
                if name == "registrationkey":
                    raise RequestError("registrationkey breaks Table 5.1") from None
                raise RequestError(f"{name} {exc}") from None
        archive = ArchiveRef(values["archiveaddress"], values["archiveserviceibi"])
        archive_key = ibimod.key(archive.serviceibi)
        everyone = source is not None and self._take(source, archive_key)
        if wait := self.accepted.wait(archive_key):
            if source is not None:
                self._give_back(source, everyone)  # not a refused check of this source
            raise _too_many(archive.serviceibi, wait)
        if not self.check_key(archive.serviceibi, values["registrationkey"]):
            # Logged without the key; the same answer whether the Archive is unknown or the
            # key is wrong.
            log.warning(
                "%s refused for %s from %s: not registered or wrong registration key",
                subject,
                archive.serviceibi,
                values["archiveip"],
            )
            raise Refused(
                f"{subject} refused: {archive.serviceibi} is not registered here "
                "or the registration key is wrong"
            )
        if source is not None:
            self._give_back(source, everyone)
        # Taken now, or refused: every request sent together passed `wait` before any was
        # charged (scrypt is 61 ms), so 16 threads made 16 confirmations at each refill.
        if wait := self.accepted.take(archive_key):
            raise _too_many(archive.serviceibi, wait)
        if subject == EXCLUSION:
            with self._db() as run:
                run(
                    "UPDATE {table} SET included = 0, since = ? WHERE ibikey = ?",
                    (_now(), ibimod.key(archive.serviceibi)),
                )
            log.info("excluded %s", archive)
            return [("status.archive", "excluded")]
        if is_self(archive.address):  # after the key: only a registered Archive costs a lookup
            log.warning(
                "inclusionRequest refused for %s: archiveaddress %s is the resolver's own address",
                archive.serviceibi,
                archive.address,
            )
            raise Refused(
                f"inclusionRequest refused: archiveaddress {archive.address} is the "
                "resolver's own address; give the address where the Archive's "
                "service answers"
            )
        confirmation = "successful" if confirm(archive) else "unsuccessful"
        with self._db() as run:
            run(
                "UPDATE {table} SET included = 1, since = ?, address = ?, ip = ?, "
                "platformversion = ?, email = ?, confirmation = ? WHERE ibikey = ?",
                (
                    _now(),
                    archive.address,
                    values["archiveip"],
                    values["archiveplatformversion"],
                    values["archiveadmemailaddress"],
                    confirmation,
                    ibimod.key(archive.serviceibi),
                ),
            )
        log.info("included %s (confirmation %s)", archive, confirmation)
        return [("status.archive", "included"), ("status.confirmation", confirmation)]
