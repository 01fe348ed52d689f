"""Joining and leaving the resolution system (SPEC §5, seed §5.2).

The Archive sends `servicesubject=inclusionRequest` to the resolver once its service answers,
and `servicesubject=exclusionRequest` when it stops, each with the other seven pairs of
Table 5.2.
During the inclusion the resolver calls the service back with `inclusionConfirmationRequest`.

Three modules, none importing Flask:

- this one, the protocol: the pairs, their encoding (§3), the resolver's status answer, over
  urllib.request; the registration key is a secret and every text that reaches a log goes
  through `Announcement.redact`;
- serve/lifecycle.py, the lifecycle under gunicorn (`Lifecycle`, called from serve/runner.py's
  hooks): one *announcer process* per service start does the inclusion, the master itself
  sends the exclusion;
- serve/announcer.py, that process (`main`), and our own socket it waits for (`Local`).

Why a process for the inclusion: gunicorn's `when_ready` runs in the master before any worker
exists, so the inclusion has to wait until a worker answers, and the master must not block
meanwhile. A thread doing that in the master would be forked, mid-request and holding its
locks, into every worker born later (including one that replaces a dead worker an hour on),
and anything run in the workers would run once per worker. A fresh interpreter
(`announcer.main` in a new Python, its job read from stdin, never from argv or the environment,
so the key shows in no `ps`) shares nothing with them, retries with bounded backoff as long as
needed, and is started again only by a new master. The exclusion is sent from `on_exit`,
which gunicorn runs once after the last worker has stopped: nothing forks after it, so a
thread there that waits at most `exclusion_timeout` is safe.
"""

from __future__ import annotations

import contextlib
import http.client
import logging
import os
import random
import stat
import threading
import time
import urllib.error
import urllib.request
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote, urljoin, urlsplit

from .. import __version__, settings
from ..common import inclusion, logs
from ..common.deadline import Overdue, call_within
from ..common.net import host_port, is_loopback_host
from ..protocol import pairs as pairsmod
from ..settings import ConfigError, ConfigWarning
from . import identity

log = logging.getLogger(__name__)

INCLUSION = "inclusionRequest"
EXCLUSION = "exclusionRequest"
CONFIRMATION = "inclusionConfirmationRequest"
CREDENTIAL = "registrationkey"  # systemd: LoadCredential=registrationkey:/etc/…
SECRET = "<secret>"
# Table 5.2, after servicesubject, in the order of the seed's Examples 5.2 and 5.3.
PAIR_NAMES = (
    "archiveaddress",
    "archiveserviceibi",
    "archiveip",
    "archiveprotocol",
    "archiveplatformversion",
    "archiveadmemailaddress",
    "registrationkey",
)

# §3 escapes space % & + = ?; '#' and the characters RFC 3986 forbids in a query are escaped
# too so the request stays one URL. The rest of printable ASCII ('/', ':', '@' of IBIs, hosts
# and e-mail addresses) is written as is, as in the seed's Examples 5.2 and 5.3.
_SAFE = "".join(chr(c) for c in range(0x21, 0x7F) if chr(c) not in '%&+=?#"<>\\^`{|}')

INCLUSION_TIMEOUT = 30.0  # the resolver calls the Archive back before it answers
FIRST_RETRY = 1.0  # seconds; doubles after each failed inclusion, up to MAX_RETRY
MAX_RETRY = 300.0
MAX_BODY = 64 * 1024
LOCAL_TIMEOUT = 5.0
SLOW_START_WARNING = 30.0  # seconds without an answer from our own socket before saying so


def encode(value: str) -> str:
    """A request value escaped as §3 says: space %20, % %25, & %26, + %2B, = %3D, ? %3F."""
    return quote(value, safe=_SAFE)


class ResolverError(Exception):
    """The resolver could not be reached or did not answer a status; the text is redacted."""


@dataclass(frozen=True)
class Announcement:
    """What this Archive tells the resolver: its base URL and the pairs of Table 5.2."""

    resolver: str
    pairs: tuple[tuple[str, str], ...]
    exclusion_timeout: float = 5.0

    @classmethod
    def build(
        cls,
        resolver: str,
        *,
        archiveaddress: str,
        archiveserviceibi: str,
        archiveip: str,
        archiveplatformversion: str,
        archiveadmemailaddress: str,
        registrationkey: str,
        exclusion_timeout: float = 5.0,
    ) -> Announcement:
        values = dict(
            archiveaddress=archiveaddress,
            archiveserviceibi=archiveserviceibi,
            archiveip=archiveip,
            archiveprotocol="HTTP",
            archiveplatformversion=archiveplatformversion,
            archiveadmemailaddress=archiveadmemailaddress,
            registrationkey=registrationkey,
        )
        return cls(
            resolver, tuple((name, values[name]) for name in PAIR_NAMES), float(exclusion_timeout)
        )

    def value(self, name: str) -> str:
        return dict(self.pairs)[name]

    def url(self, subject: str) -> str:
        query = "&".join(
            f"{name}={encode(value)}" for name, value in (("servicesubject", subject), *self.pairs)
        )
        return self.resolver + ("&" if "?" in self.resolver else "?") + query

    def redact(self, text: str) -> str:
        key = self.value("registrationkey")
        return text.replace(key, SECRET).replace(encode(key), SECRET) if key else text

    def same_message(self, other: Announcement | None) -> bool:
        """Whether `other` would tell the resolver the same thing (reload keeps us included)."""
        return other is not None and (self.resolver, self.pairs) == (other.resolver, other.pairs)

    def confirmation_path(self) -> str:
        service = quote(self.value("archiveserviceibi"), safe="/@:")
        return f"/{service}?servicesubject={CONFIRMATION}"

    def to_json(self) -> dict[str, Any]:
        return {
            "resolver": self.resolver,
            "pairs": [list(p) for p in self.pairs],
            "exclusion_timeout": self.exclusion_timeout,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Announcement:
        return cls(
            data["resolver"],
            tuple((str(n), str(v)) for n, v in data["pairs"]),
            float(data["exclusion_timeout"]),
        )


# ------------------------------------------------------------------------------- settings


def _read_key(path: Path, where: str) -> str:
    try:
        text = path.read_bytes().decode("ascii").strip()
    except OSError as exc:
        raise ConfigError(f"{where}: cannot read it ({exc.strerror})") from None
    except UnicodeDecodeError:
        raise ConfigError(f"{where}: does not hold a registration key (not ASCII)") from None
    try:
        key = settings.BY_NAME["registrationkey"].parse(text)
    except ValueError as exc:
        raise ConfigError(f"{where}: does not hold a registration key ({exc})") from None
    if path.stat().st_mode & stat.S_IROTH:
        warnings.warn(
            f"{where} can be read by every user of this machine: chmod o-r {path}",
            ConfigWarning,
            stacklevel=3,
        )
    return key


def registration_key(config: Mapping[str, Any], environ: Mapping[str, str] | None = None) -> str:
    """The key from `registrationkey`, else `registrationkey_file`, else systemd's credential;
    "" when none is given (the Archive then joins no resolver)."""
    environ = os.environ if environ is None else environ
    if config.get("registrationkey") and config.get("registrationkey_file"):
        raise ConfigError(
            "settings registrationkey and registrationkey_file are both given: keep one of them"
        )
    if config.get("registrationkey"):
        return config["registrationkey"]
    if config.get("registrationkey_file"):
        path = config["registrationkey_file"]
        return _read_key(Path(path), f"setting registrationkey_file = {path}")
    credentials = environ.get("CREDENTIALS_DIRECTORY")
    if credentials and (Path(credentials) / CREDENTIAL).exists():
        path = Path(credentials) / CREDENTIAL
        with contextlib.suppress(OSError):  # unreadable: _read_key says so
            if not path.read_bytes().strip():
                # LoadCredential= needs the file to exist: left empty, it is how the unit runs
                # not joined (contrib/systemd/README.md), not a mistyped key.
                return ""
        return _read_key(path, f"systemd credential {path}")
    return ""


def silence(config: settings.Config) -> str:
    """Why nothing is announced (the line logged once at start), when from_config gives None."""
    if config.resolver == "none":
        return "not announcing to any resolver (resolver: none)"
    return (
        "this Archive is not joined to any resolver (no registration key): it answers, but "
        f"persistent URLs do not reach it. To join {config.resolver}, set registrationkey_file "
        "(a file holding the key the resolver's operator gave you) and archiveaddress (the "
        "host[:port] where the resolver reaches this Archive)"
    )


def _unreachable(config: settings.Config) -> str | None:
    """Why the resolver could not reach archiveaddress, or None: an address the admin did not
    give (the bind address), or a loopback one sent to a resolver on another machine."""
    if identity.address_defaulted(config):
        return (
            f"setting archiveaddress is not set, and the bind address {config.archiveaddress} "
            f"it defaults to is not announced: give archiveaddress, the host[:port] where the "
            f"resolver {config.resolver} reaches this Archive"
        )
    host, _ = host_port(config.archiveaddress)
    if is_loopback_host(host) and not is_loopback_host(urlsplit(config.resolver).hostname or ""):
        return (
            f"setting archiveaddress {config.archiveaddress} is a loopback address, which the "
            f"resolver {config.resolver} on another machine cannot reach: give archiveaddress, "
            "the host[:port] where it reaches this Archive"
        )
    return None


def from_config(
    config: settings.Config,
    environ: Mapping[str, str] | None = None,
    problems: list[str] | None = None,
) -> Announcement | None:
    """The announcement of a validated config; None when nothing is announced (resolver:
    none, or no registration key: `silence` says which).

    When a pair cannot be built, each reason is a line added to `problems`, or, without that
    list, ConfigError listing them all."""
    found: list[str] = []
    key = ""
    if config.resolver != "none":
        try:
            key = registration_key(config, environ)
        except ConfigError as exc:
            found.append(str(exc))
    if key:
        needed = ["archiveip", "archiveplatformversion", "archiveadmemailaddress"]
        if not problems:  # else it was not minted, as the start stops anyway
            needed.insert(0, "archiveserviceibi")
        suffix = (
            f"; it is sent to the resolver {config.resolver} (without a registration key, "
            "or with resolver: none or --no-announce, nothing is announced)"
        )
        found += [line + suffix for line in config.missing(*needed)]
        if config.archiveaddress and (reason := _unreachable(config)):
            found.append(reason)
        elif not config.archiveaddress:
            found += config.missing("archiveaddress")
    if found:
        if problems is None:
            raise ConfigError(*found)
        problems += found
        return None
    if not key:
        return None
    return Announcement.build(
        config.resolver,
        archiveaddress=config.archiveaddress,
        archiveserviceibi=config.archiveserviceibi,
        archiveip=config.archiveip,
        archiveplatformversion=config.archiveplatformversion,
        archiveadmemailaddress=config.archiveadmemailaddress,
        registrationkey=registration_key(config, environ),
        exclusion_timeout=config.exclusion_timeout,
    )


# ------------------------------------------------------------------------------- protocol


def status_line(status: Mapping[str, str]) -> str:
    return " ".join(f"{name} {value}" for name, value in status.items()) or "(an empty list)"


def _snippet(body: bytes, redact: Callable[[str], str]) -> str:
    # Redacted before it is cut: a page echoing the request, cut inside the key, showed the
    # digits before the cut (in the log, and in /health's and the overview's inclusion detail).
    text = redact(body.decode("ascii", "backslashreplace"))
    return repr(text[:200]) + (" …" if len(text) > 200 else "")


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """Every message carries the registration key in its query: repeating it at a Location the
    resolver names would hand the key to whatever host that is (issue 15)."""

    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None  # urllib then raises the 3xx as an HTTPError


_OPENER = urllib.request.build_opener(_NoRedirect())


def transport_warning(announcement: Announcement) -> str | None:
    """Why the resolver URL is a risk for the key, or None: plain http:// to another machine
    lets anyone on the path read the key in the query."""
    parts = urlsplit(announcement.resolver)
    if parts.scheme != "http" or not parts.hostname:
        return None
    if is_loopback_host(parts.hostname):
        return None
    return (
        f"the resolver {announcement.resolver} is plain http://: the registrationkey in "
        f"every inclusionRequest and exclusionRequest crosses the network readable by anyone "
        f"on the path; use its https:// URL if it has one"
    )


def ask(announcement: Announcement, subject: str, timeout: float) -> dict[str, str]:
    """Send one message to the resolver; its answer as a dict of pairs, or ResolverError.

    Redirects are not followed (see `_NoRedirect`): a 3xx is a failure naming where it led.
    The whole exchange is waited for at most `timeout` (and a second for the request's own
    timeouts to say it first): urllib's timeout is per read, and a resolver sending a byte
    now and then held the announcer for as long as it liked, never retrying nor noticing
    that its master had gone. The request runs in a thread of its own for that."""
    try:
        return call_within(timeout + 1, lambda: _ask(announcement, subject, timeout), subject)
    except Overdue:
        shown = announcement.redact(announcement.url(subject))
        raise ResolverError(f"{shown} gave no answer within {timeout:g} s") from None


def _read(response: Any, deadline: float, timeout: float) -> bytes:
    """At most MAX_BODY bytes of a body, read until `deadline` (then TimeoutError)."""
    body = b""
    while len(body) < MAX_BODY:
        if time.monotonic() > deadline:
            raise TimeoutError(f"the answer did not end within {timeout:g} s")
        if not (piece := response.read1(MAX_BODY - len(body))):
            break
        body += piece
    return body


def _ask(announcement: Announcement, subject: str, timeout: float) -> dict[str, str]:
    shown = announcement.redact(announcement.url(subject))
    deadline = time.monotonic() + timeout
    request = urllib.request.Request(
        announcement.url(subject), headers={"User-Agent": f"archive-service/{__version__}"}
    )
    try:
        try:
            with _OPENER.open(request, timeout=timeout) as response:
                body = _read(response, deadline, timeout)
        except urllib.error.HTTPError as exc:
            if 300 <= exc.code < 400:
                exc.close()
                location = urljoin(request.full_url, exc.headers.get("Location", ""))
                raise ResolverError(
                    f"{shown} answered HTTP {exc.code} redirecting to "
                    f"{urlsplit(location).netloc or 'nowhere'}: not followed, the request carries "
                    f"the registration key; if that host is the resolver, set resolver to its URL"
                ) from None
            try:  # here, not in the clauses below: a body that stalled or was cut escaped them
                body = _read(exc, deadline, timeout) if exc.fp else b""
                detail = _snippet(body, announcement.redact) if body else ""
            except (OSError, http.client.HTTPException, ValueError) as cut:
                detail = f"(its body could not be read: {cut!r})"
            finally:
                exc.close()
            # The reason phrase is the resolver's text (up to a 64 KiB line): shown escaped and
            # short (redacted before it is cut), as the body is: it goes to the log and /health.
            reason = announcement.redact(str(exc.reason))[:100]
            reason = logs.shown(reason.encode("ascii", "backslashreplace").decode("ascii"))
            raise ResolverError(
                f"{shown} answered HTTP {exc.code} {reason} {detail}".rstrip()
            ) from None
        except urllib.error.URLError as exc:
            raise ResolverError(f"{shown} could not be reached: {exc.reason}") from None
        except (OSError, http.client.HTTPException, ValueError) as exc:
            raise ResolverError(f"{shown} could not be reached: {exc!r}") from None
        try:
            text = body.decode("ascii")
            status = pairsmod.parse(text.strip())
        except (UnicodeDecodeError, pairsmod.PairsError):
            raise ResolverError(
                f"{shown} answered HTTP 200 but not a list of pairs: "
                f"{_snippet(body, announcement.redact)}"
            ) from None
        return dict(status)
    except ResolverError as exc:
        raise ResolverError(announcement.redact(str(exc))) from None


class NotIncluded(ResolverError):
    """The resolver answered, and not `status.archive included`."""


def include(announcement: Announcement, timeout: float = INCLUSION_TIMEOUT) -> dict[str, str]:
    status = ask(announcement, INCLUSION, timeout)
    if status.get("status.archive") != "included":
        raise NotIncluded(
            announcement.redact(
                f"{announcement.resolver} did not include this Archive; it answered: "
                f"{status_line(status)}"
            )
        )
    return status


def report_inclusion(
    announcement: Announcement, status: Mapping[str, str], state_dir: str | None = None
) -> bool:
    """Log (and record in `state_dir`) what the resolver answered; whether it confirmed."""
    line = announcement.redact(status_line(status))
    if status.get("status.confirmation") == "successful":
        record_state(state_dir, "included", announcement, line)
        log.info("resolver %s: %s", announcement.resolver, line)
        return True
    record_state(state_dir, "unconfirmed", announcement, line)
    address = announcement.value("archiveaddress")
    service = announcement.value("archiveserviceibi")
    log.warning(
        "resolver %s: %s -- the Archive is included but the resolver's call to "
        "http://%s/%s?servicesubject=%s did not get 'confirmation yes': check that %s is "
        "reachable from the Internet (DNS, firewall, the archiveaddress setting) and that the "
        "web server passes /%s to this service (see contrib/apache, contrib/nginx)",
        announcement.resolver,
        line,
        address,
        service,
        CONFIRMATION,
        address,
        service,
    )
    return False


def record_state(
    state_dir: str | None, state: str, announcement: Announcement, detail: str
) -> None:
    if state_dir:
        inclusion.record(state_dir, state, announcement.resolver, detail)


def exclude(announcement: Announcement, timeout: float) -> None:
    """Send the exclusionRequest and log what came of it; never raises."""
    try:
        report_exclusion(announcement, ask(announcement, EXCLUSION, timeout))
    except ResolverError as exc:
        report_exclusion(announcement, exc)


def report_exclusion(
    announcement: Announcement, outcome: Mapping[str, str] | Exception | None, waited: float = 0.0
) -> None:
    if outcome is None:
        log.warning(
            "the resolver was not told that this Archive left: %s did not answer the "
            "exclusionRequest within %g s (exclusion_timeout); stopping anyway",
            announcement.resolver,
            waited,
        )
    elif isinstance(outcome, Exception):
        log.warning("the resolver was not told that this Archive left: %s", outcome)
    elif outcome.get("status.archive") == "excluded":
        log.info(
            "resolver %s: %s", announcement.resolver, announcement.redact(status_line(outcome))
        )
    else:
        log.warning(
            "the resolver was not told that this Archive left: %s answered %s instead "
            "of status.archive excluded",
            announcement.resolver,
            announcement.redact(status_line(outcome)),
        )


def exclude_within(announcement: Announcement, seconds: float) -> None:
    """`exclude`, but give up after `seconds` whatever the resolver (or DNS) does."""
    outcome: list[Mapping[str, str] | Exception] = []

    def send() -> None:
        try:  # the socket may wait a little longer: the deadline here is the join below
            outcome.append(ask(announcement, EXCLUSION, seconds + 1))
        except ResolverError as exc:
            outcome.append(exc)

    sender = threading.Thread(target=send, daemon=True, name="exclusionRequest")
    sender.start()
    sender.join(seconds)
    report_exclusion(announcement, outcome[0] if outcome else None, seconds)


def backoff(attempt: int, first: float = FIRST_RETRY) -> float:
    """Seconds before retry `attempt` (0, 1, …): doubling, capped at MAX_RETRY, with jitter so
    that Archives restarted together (a power cut) do not knock on the resolver in step."""
    return min(MAX_RETRY, first * 2 ** min(attempt, 64)) * random.uniform(0.5, 1.0)
