"""The announcements' lifecycle under gunicorn (`Lifecycle`, called from serve/runner.py's
hooks): the master starts one announcer process per service start (serve/announcer.py) and
sends the exclusion itself from `on_exit` (see announce.py's docstring for why)."""

from __future__ import annotations

import functools
import json
import os
import subprocess
from collections.abc import Callable
from typing import Any

from ..common import inclusion
from ..common.processes import child_environment, python_executable

# The announcement's one logger, as before these modules were split out of announce.py.
from .announce import Announcement, exclude_within, log, record_state, transport_warning
from .announcer import UNCONFIRMED, Local

ANNOUNCER = "import sys; from archive_service.serve.announcer import main; sys.exit(main())"


# ------------------------------------------------------------------------ master (gunicorn)


def _never_raises(method: Callable[..., None]) -> Callable[..., None]:
    """Announcing must never stop the service: log what went wrong (without the key), go on."""

    @functools.wraps(method)
    def guarded(self: Lifecycle, *args: Any, **kwargs: Any) -> None:
        try:
            method(self, *args, **kwargs)
        except Exception as exc:
            text = self.announcement.redact(repr(exc)) if self.announcement else repr(exc)
            log.error("announcing: %s failed: %s", method.__name__, text)

    return guarded


class Lifecycle:
    """The master's side: start the announcer once per start, exclude on exit. The inclusion's
    state is recorded in `state_dir` (common/inclusion.py); `silence` is why nothing is
    announced when `announcement` is None. With `database` (several nodes), the announcer
    lives as long as the master and decides itself, as the membership's holder or not,
    what to send on exit (`hold_membership`)."""

    def __init__(
        self,
        announcement: Announcement | None,
        state_dir: str | None = None,
        silence: str = "",
        database: str = "",
    ):
        self.announcement = announcement
        self.state_dir = state_dir
        self.silence = silence
        self.database = database
        self.local: Local | None = None
        self.process: subprocess.Popen | None = None

    @_never_raises
    def start(self, local: Local) -> None:
        self.local = local
        if self.announcement is None:
            self._not_joined()
            return
        if warning := transport_warning(self.announcement):
            log.warning("%s", warning)
        self._spawn(join=self.announcement)

    def _not_joined(self) -> None:
        log.info("%s", self.silence or "not announcing to any resolver")
        if self.state_dir:
            inclusion.record(self.state_dir, "not-joined", "", self.silence)

    @_never_raises
    def reload(
        self,
        announcement: Announcement | None,
        local: Local,
        state_dir: str | None = None,
        silence: str = "",
        database: str | None = None,
    ) -> None:
        """SIGHUP: leave and join again if what we tell the resolver changed; join again if
        the last inclusion was not confirmed (the admin may have fixed what the resolver's
        call-back met: the proxy, DNS, the firewall) or never happened."""
        old, self.announcement, self.local = self.announcement, announcement, local
        self.state_dir, self.silence = state_dir or self.state_dir, silence or self.silence
        old_database = self.database
        if database is not None:
            self.database = database
        if self.database or old_database:
            self._reload_member(old, old_database)
            return
        if announcement is None and old is None:
            return
        if announcement is not None and announcement.same_message(old):
            if (outcome := self._outcome()) in ("included", "announcing"):
                log.info(
                    "reload: the announced pairs are unchanged, staying included%s",
                    " (the inclusionRequest is under way)" if outcome == "announcing" else "",
                )
                return
            log.info(
                "reload: the announced pairs are unchanged but the last inclusion was %s: "
                "inclusionRequest again",
                outcome,
            )
            self.stop_announcer()
            self._spawn(join=announcement)
            return
        self.stop_announcer()
        log.info(
            "reload: the announced pairs changed: %s",
            "exclusionRequest with the old ones, then inclusionRequest with the new ones"
            if old and announcement
            else "exclusionRequest"
            if old
            else "inclusionRequest",
        )
        if announcement and (warning := transport_warning(announcement)):
            log.warning("%s", warning)
        self._spawn(join=announcement, leave=old)
        if announcement is None:
            self._not_joined()

    def _outcome(self) -> str:
        """What came of the last inclusion, as the announcer recorded it in the state dir
        (it records before it logs). Its exit status is only a fallback: gunicorn's master
        reaps every child it has, so Popen may never see the status (it then says 0)."""
        if self.process is None:
            return "not done"
        recorded = inclusion.read(self.state_dir) if self.state_dir else None
        ended = self.process.poll() is not None
        if recorded is not None and recorded.state == "announcing":
            return "not done" if ended else "announcing"  # ended: it died on the way
        if recorded is not None and recorded.state in (
            "included",
            "unconfirmed",
            "failed",
            "excluded",
        ):
            return recorded.state
        code = self.process.returncode
        if not ended:
            return "announcing"
        return "included" if code == 0 else "unconfirmed" if code == UNCONFIRMED else "failed"

    def _reload_member(self, old: Announcement | None, old_database: str) -> None:
        """SIGHUP among several nodes: a running announcer keeps the membership when nothing
        it announces changed; else it leaves (hands over, or excludes as the last node) and
        a new one joins with the new settings."""
        running = self.process is not None and self.process.poll() is None
        announcement = self.announcement
        if announcement is None and old is None:
            return
        if (
            running
            and announcement is not None
            and announcement.same_message(old)
            and old_database == self.database
        ):
            log.info("reload: the announced pairs are unchanged, the announcer goes on")
            return
        self._stop_member(quiet=False)
        if announcement is None:
            self._not_joined()
            return
        log.info("reload: a new announcer joins with the current settings")
        self._spawn(join=announcement)

    def _stop_member(self, quiet: bool) -> None:
        """Stop an announcer of several nodes: SIGTERM lets it hand over or exclude (waiting
        for that); `quiet` (a new master takes over) kills it, and the server frees its
        locks for the new master's announcer."""
        process, self.process = self.process, None
        if process is None or process.poll() is not None:
            return
        if quiet:
            process.kill()
            process.wait()
            return
        from .membership import HANDOVER_WAIT

        exclusion = self.announcement.exclusion_timeout if self.announcement else 5.0
        timeout = exclusion + HANDOVER_WAIT + 5
        process.terminate()
        try:
            process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            log.warning("the announcer did not leave within %g s: stopped", timeout)
            process.kill()
            process.wait()

    @_never_raises
    def leave(self, handing_over: bool = False) -> None:
        """on_exit: stop the announcer, then tell the resolver, waiting at most
        exclusion_timeout. Among several nodes the announcer decides (`hold_membership`)."""
        if self.database:
            if handing_over:
                log.info("a new master took over: no exclusionRequest")
            self._stop_member(quiet=handing_over)
            return
        self.stop_announcer()
        if self.announcement is None:
            return
        if handing_over:  # SIGUSR2 upgrade: the new master announced the same Archive
            log.info("a new master took over: no exclusionRequest")
            return
        exclude_within(self.announcement, self.announcement.exclusion_timeout)
        record_state(self.state_dir, "left", self.announcement, "the service stopped")

    def _spawn(self, join: Announcement | None, leave: Announcement | None = None) -> None:
        if join:  # before the announcer runs: no earlier outcome stands for this one
            record_state(self.state_dir, "announcing", join, "starting the announcer")
        job = {
            "parent": os.getpid(),
            "local": vars(self.local) if self.local else None,
            "join": join.to_json() if join else None,
            "leave": leave.to_json() if leave else None,
            "state_dir": self.state_dir,
            "database": self.database or None,
        }
        try:
            process = subprocess.Popen(
                [python_executable(), "-c", ANNOUNCER],
                stdin=subprocess.PIPE,
                env=child_environment(),
                close_fds=True,
            )
            with process.stdin:
                process.stdin.write(json.dumps(job).encode("ascii"))
        except OSError as exc:
            log.error("could not start the announcer process, not announcing: %s", exc)
            return
        self.process = process
        if join:
            log.info(
                "announcer (pid %d) sends the inclusionRequest to %s once %s answers%s",
                process.pid,
                join.resolver,
                self.local,
                " and this node holds the Archive's membership" if self.database else "",
            )

    def stop_announcer(self) -> None:
        process, self.process = self.process, None
        if process is None or process.poll() is not None:
            return
        process.terminate()
        try:
            process.wait(timeout=2)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
