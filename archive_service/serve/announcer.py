"""The announcer process (see announce.py's docstring): a fresh interpreter started by the
gunicorn master for each service start (`main`, its job on stdin) that waits until our own
socket answers (`Local`, `service_answers`), sends the inclusion with bounded backoff, and
among several nodes holds the Archive's membership (`hold_membership`)."""

from __future__ import annotations

import http.client
import ipaddress
import json
import os
import signal
import socket
import sys
import time
from dataclasses import dataclass
from typing import Any

from .. import __version__
from ..common import logs

# The announcement's one logger, as before these modules were split out of announce.py.
from .announce import (
    CONFIRMATION,
    FIRST_RETRY,
    LOCAL_TIMEOUT,
    SLOW_START_WARNING,
    Announcement,
    NotIncluded,
    ResolverError,
    backoff,
    exclude,
    exclude_within,
    include,
    log,
    record_state,
    report_inclusion,
)

# --------------------------------------------------------------------------- our own socket


@dataclass(frozen=True)
class Local:
    """Where gunicorn listens: host and port, or the path of a unix socket."""

    host: str | None = None
    port: int | None = None
    path: str | None = None

    @classmethod
    def of_socket(cls, sock: socket.socket) -> Local:
        if sock.family == socket.AF_UNIX:
            return cls(path=sock.getsockname())
        host, port = sock.getsockname()[:2]
        if ipaddress.ip_address(host).is_unspecified:  # bound to every address: ask loopback
            host = "::1" if sock.family == socket.AF_INET6 else "127.0.0.1"
        return cls(host=host, port=port)

    def __str__(self) -> str:
        if self.path:
            return "unix:" + self.path
        return (
            f"[{self.host}]:{self.port}" if ":" in (self.host or "") else f"{self.host}:{self.port}"
        )

    def connection(self, timeout: float) -> http.client.HTTPConnection:
        if self.path:
            return _UnixConnection(self.path, timeout)
        return http.client.HTTPConnection(self.host, self.port, timeout=timeout)


class _UnixConnection(http.client.HTTPConnection):
    def __init__(self, path: str, timeout: float):
        super().__init__("localhost", timeout=timeout)
        self.unix_path = path

    def connect(self) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(self.timeout)
        self.sock.connect(self.unix_path)


def service_answers(announcement: Announcement, local: Local) -> bool:
    """Whether our own socket answers the confirmation as the resolver will ask it."""
    connection = local.connection(LOCAL_TIMEOUT)
    try:
        connection.request(
            "GET",
            announcement.confirmation_path(),
            headers={
                "Host": announcement.value("archiveaddress"),
                "User-Agent": f"archive-service/{__version__} announcer",
            },
        )
        response = connection.getresponse()
        return response.status == 200 and response.read(100).strip() == b"confirmation yes"
    except (OSError, http.client.HTTPException):
        return False
    finally:
        connection.close()


# ------------------------------------------------------------------------ announcer process


_leaving = False  # set by SIGTERM in an announcer holding membership among several nodes


def _parent_gone(parent: int | None) -> bool:
    """Whether to stop: the master died, or (several nodes) it asked us to leave."""
    return _leaving or (parent is not None and os.getppid() != parent)


def _pause(seconds: float, parent: int | None) -> bool:
    """Sleep, waking often to see whether the master died; False if it did."""
    end = time.monotonic() + seconds
    while (left := end - time.monotonic()) > 0:
        if _parent_gone(parent):
            return False
        time.sleep(min(left, 0.2))
    return not _parent_gone(parent)


def join_when_answering(
    announcement: Announcement,
    local: Local,
    parent: int | None = None,
    first_retry: float = FIRST_RETRY,
    state_dir: str | None = None,
) -> bool | None:
    """Wait until the service answers, then include it, retrying with backoff; once included,
    whether the resolver confirmed it. Each outcome is recorded in `state_dir`.

    Returns None (nothing more to do) if the master that started us goes away.
    """
    record_state(state_dir, "announcing", announcement, f"waiting for the service at {local}")
    waited, pause = 0.0, 0.05
    while not service_answers(announcement, local):
        if not _pause(pause, parent):
            return None
        waited += pause
        if waited >= SLOW_START_WARNING > waited - pause:
            log.warning(
                "the service does not answer %s at %s yet; the inclusionRequest waits for it",
                CONFIRMATION,
                local,
            )
        pause = min(pause * 2, 1.0)
    attempt = 0
    while True:
        try:
            status = include(announcement)
        except ResolverError as exc:
            delay = backoff(attempt, first_retry)
            state = "excluded" if isinstance(exc, NotIncluded) else "failed"
            record_state(state_dir, state, announcement, str(exc))
            log.warning("inclusion not done, next try in %.1f s: %s", delay, exc)
            attempt += 1
            if not _pause(delay, parent):
                return None
            continue
        return report_inclusion(announcement, status, state_dir)


UNCONFIRMED = 3  # the announcer's exit status when included without confirmation
CHECK_EVERY = 2.0  # seconds between a holder's looks at its database connection


def _on_sigterm(signum: int, frame: Any) -> None:
    global _leaving
    _leaving = True


def hold_membership(
    announcement: Announcement,
    local: Local,
    parent: int | None,
    database: str,
    state_dir: str | None = None,
) -> int:
    """The announcer of one of several nodes (`database` set; serve/membership.py): wait for
    the Archive's membership, then join as the holder and keep it while the master lives.
    SIGTERM (the master stopping): a holder hands the membership over if another node runs,
    else sends the exclusionRequest; a standby just goes. The master dying: just go (the
    server releases the locks; another node takes over and includes the Archive again)."""
    from ..common.postgres import DatabaseError, redacted
    from . import membership

    signal.signal(signal.SIGTERM, _on_sigterm)
    where = redacted(database)
    serviceibi = announcement.value("archiveserviceibi")
    attempt = 0
    while not _parent_gone(parent):
        try:
            member = membership.Membership(database, serviceibi)
        except DatabaseError as exc:
            delay = backoff(attempt)
            record_state(state_dir, "failed", announcement, f"{exc}; next try in {delay:.0f} s")
            log.warning("membership: %s; next try in %.1f s", exc, delay)
            attempt += 1
            _pause(delay, parent)
            continue
        attempt = 0
        try:
            outcome = _member(member, announcement, local, parent, state_dir)
        except Exception as exc:  # noqa: BLE001 (the connection broke: the locks are gone)
            outcome = None
            detail = f"the database connection to {where} broke ({type(exc).__name__})"
            record_state(state_dir, "announcing", announcement, detail + "; connecting again")
            log.warning("membership: %s; connecting again", detail)
        finally:
            member.close()
        if outcome is not None:
            return outcome
        _pause(FIRST_RETRY, parent)
    if _leaving:
        record_state(
            state_dir, "left", announcement, "the service stopped, not holding the membership"
        )
    return 0


def _member(member, announcement, local, parent, state_dir) -> int | None:
    """One connection's life: standby, holder, leaving. None when the connection broke."""
    if not member.held:
        holder = member.holder()
        record_state(
            state_dir,
            "standby",
            announcement,
            f"the membership is held by another node ({holder})"
            if holder
            else "waiting for the membership",
        )
        if holder:
            log.info("membership held by another node (%s): standing by", holder)
        if not member.acquire(lambda: _parent_gone(parent)):
            if _leaving:
                record_state(
                    state_dir, "left", announcement, "the service stopped (not the holder)"
                )
                log.info("stopping: the membership is held by another node, no exclusionRequest")
            return 0
        log.info("this node holds the Archive's membership: it announces")
        join_when_answering(announcement, local, parent, state_dir=state_dir)
    last_check = time.monotonic()
    while not _parent_gone(parent):
        time.sleep(0.2)
        if time.monotonic() - last_check >= CHECK_EVERY:
            if not member.alive():
                return None
            last_check = time.monotonic()
    if not _leaving:  # the master died: the server frees the locks as we exit
        return 0
    member.leave_node()
    others = member.others()
    if others and member.hand_over():
        record_state(state_dir, "left", announcement, "handed the membership to another node")
        log.info("stopping: %d other node(s) run; handed the membership over, no exclusion", others)
        return 0
    exclude_within(announcement, announcement.exclusion_timeout)
    record_state(state_dir, "left", announcement, "the service stopped (the last node)")
    return 0


def main() -> int:
    """The announcer process: its job (JSON) on stdin, written by `Lifecycle`. Exit status 0
    when it has nothing more to do, UNCONFIRMED when the resolver could not confirm."""
    logs.configure()
    # Ctrl-C reaches the whole process group; the master decides when we stop (SIGTERM).
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    job = json.load(sys.stdin)
    parent = job["parent"]
    if job.get("database") and job.get("join"):
        return hold_membership(
            Announcement.from_json(job["join"]),
            Local(**job["local"]),
            parent,
            job["database"],
            job.get("state_dir"),
        )
    if job.get("leave"):
        old = Announcement.from_json(job["leave"])
        exclude(old, old.exclusion_timeout)
    if job.get("join"):
        confirmed = join_when_answering(
            Announcement.from_json(job["join"]),
            Local(**job["local"]),
            parent,
            state_dir=job.get("state_dir"),
        )
        return UNCONFIRMED if confirmed is False else 0
    return 0
