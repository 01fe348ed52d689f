"""Talking to Archive services over HTTP: urlRequest to all at once, confirmation, thanks.

Each Archive gets its own request with a timeout; answers are collected in the order they
arrive, and an Archive that does not answer in time is reported, never waited on longer.
Requests go straight to the Archives (no proxy from the environment): an Archive's address
is what it announced.
"""

from __future__ import annotations

import logging
import os
import threading
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, as_completed
from concurrent.futures import TimeoutError as FuturesTimeout
from urllib.parse import quote

from .. import __version__
from .. import pairs as pairsmod
from .resolve import Answer, ArchiveRef

log = logging.getLogger(__name__)

MAX_ANSWER = 1 << 20  # an answer is a few hundred bytes; anything near this is not one
# §3: space, %, &, +, =, ? (and # for the fragment) are percent-encoded; other printable
# ASCII stays readable, non-ASCII bytes become %xx.
_SAFE = "".join(chr(c) for c in range(0x21, 0x7F) if chr(c) not in "%&+=?#")


class ArchiveError(Exception):
    """An Archive gave no usable answer; the message says why, for logs and alert pages."""


def encode_query(params: Mapping[str, str]) -> str:
    def enc(text: str) -> str:
        return quote(text.encode("utf-8", "surrogateescape"), safe=_SAFE)

    return "&".join(f"{enc(name)}={enc(value)}" for name, value in params.items())


def service_url(archive: ArchiveRef, params: Mapping[str, str]) -> str:
    return f"http://{archive.address}/{archive.serviceibi}?{encode_query(params)}"


class ArchiveClient:
    """HTTP to Archives. The thread pool is made on first use in each process, so a gunicorn
    master that builds the app before forking never owns threads its workers would lose."""

    def __init__(self, timeout: float, pool_size: int = 32):
        self.timeout = timeout
        self.pool_size = pool_size
        self._opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        self._lock = threading.Lock()
        self._pool: ThreadPoolExecutor | None = None
        self._pid = 0

    def _executor(self) -> ThreadPoolExecutor:
        with self._lock:
            if self._pool is None or self._pid != os.getpid():
                self._pool = ThreadPoolExecutor(self.pool_size, thread_name_prefix="archive")
                self._pid = os.getpid()
            return self._pool

    def get(self, archive: ArchiveRef, params: Mapping[str, str]) -> list[tuple[str, str]]:
        """One request to an Archive service; its list of pairs, or ArchiveError."""
        request = urllib.request.Request(service_url(archive, params), headers={
            "User-Agent": f"archive-service-resolver/{__version__}"})
        try:
            with self._opener.open(request, timeout=self.timeout) as response:
                body = response.read(MAX_ANSWER + 1)
        except urllib.error.HTTPError as exc:
            detail = exc.read(300).decode("ascii", "replace").strip()
            raise ArchiveError(f"HTTP {exc.code}" + (f": {detail}" if detail else "")) from None
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise ArchiveError(f"no answer ({reason})") from None
        if len(body) > MAX_ANSWER:
            raise ArchiveError(f"answer longer than {MAX_ANSWER} bytes")
        try:
            return pairsmod.parse(body.decode("ascii"))
        except (UnicodeDecodeError, pairsmod.PairsError) as exc:
            raise ArchiveError(f"answer is not a list of pairs ({exc})") from None

    def ask_all(self, archives: Sequence[ArchiveRef], params: Mapping[str, str]) -> list[Answer]:
        """The same urlRequest to every Archive at once; answers in arrival order."""
        if not archives:
            return []
        pool = self._executor()
        futures: dict[Future, ArchiveRef] = {pool.submit(self.get, a, params): a for a in archives}
        answers: list[Answer] = []
        try:
            # Each request has its own timeout; this bounds the whole round even when the
            # pool is busy or an Archive trickles its answer.
            for future in as_completed(futures, timeout=self.timeout + 0.5):
                archive = futures[future]
                try:
                    answers.append(Answer.of(archive, future.result(), len(answers)))
                except ArchiveError as exc:
                    log.warning("Archive %s: %s", archive, exc)
                    answers.append(Answer(archive, {}, len(answers), error=str(exc)))
        except FuturesTimeout:
            for future, archive in futures.items():
                if not future.done():
                    future.cancel()
                    log.warning("Archive %s: no answer within %.1f s", archive, self.timeout)
                    answers.append(Answer(archive, {}, len(answers),
                                          error=f"no answer within {self.timeout:g} s"))
        return answers

    def confirm(self, archive: ArchiveRef) -> bool:
        """inclusionConfirmationRequest (Example 5.4): True when the Archive says `confirmation yes`."""
        try:
            answer = self.get(archive, {"servicesubject": "inclusionConfirmationRequest"})
        except ArchiveError as exc:
            log.warning("confirmation from %s failed: %s", archive, exc)
            return False
        if answer != [("confirmation", "yes")]:
            log.warning("confirmation from %s: unexpected answer %r", archive, answer)
            return False
        return True

    def acknowledge(self, archive: ArchiveRef, params: Mapping[str, str]) -> bool:
        """Send the acknowledgment (Table 6.11); a failure is logged, the user is still sent on."""
        try:
            answer = self.get(archive, params)
        except ArchiveError as exc:
            log.warning("acknowledgment to %s failed: %s", archive, exc)
            return False
        if answer != [("notice", "{acknowledgment received}")]:
            log.warning("acknowledgment to %s: unexpected answer %r", archive, answer)
            return False
        return True
