"""Talking to Archive services over HTTP: urlRequest to all at once, confirmation, thanks.

Each Archive gets its own request with a timeout; answers are collected in the order they
arrive, and an Archive that does not answer in time is reported, never waited on longer.
Requests go straight to the Archives (no proxy from the environment): an Archive's address
is what it announced.

Every request carries a `Via` entry naming this resolver, so a request that comes back to
the resolver is recognised (resolver/loops.py).
"""

from __future__ import annotations

import logging
import queue
import re
import socket
import struct
import threading
import time
from collections import Counter, OrderedDict, deque
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from functools import lru_cache
from urllib.parse import quote

from .. import __version__
from ..common.idle import spoke_while_idle
from ..common.logs import shown
from ..common.net import host_port
from ..common.processes import own_pid
from ..protocol import pairs as pairsmod
from . import lookups
from .http_answer import AnswerReader, ArchiveError
from .loops import new_pseudonym
from .resolve import Answer, ArchiveRef

log = logging.getLogger(__name__)

# An answer's bytes and pairs are bounded (http_answer.MAX_ANSWER): a hostile Archive's
# answer costs milliseconds to read and parse (1 MiB of valid tiny pairs took 0.47 s of CPU).
MAX_PAIRS = 2048
MAX_ARCHIVES = 4096  # Archives whose connections are kept; the least recently asked go first
RECV = 64 << 10
USER_AGENT = f"archive-service-resolver/{__version__}"
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
# §3: space, %, &, +, =, ? (and # for the fragment) are percent-encoded; other printable
# ASCII stays readable, non-ASCII bytes become %xx.
_SAFE = "".join(chr(c) for c in range(0x21, 0x7F) if chr(c) not in "%&+=?#")


# Once an answer satisfies a round, the other Archives are waited for as long again as it
# took, and at least this long (seconds): an Archive nearly as fast still has its say.
SETTLE = 0.02
# Seconds an Archive that gave no answer (timeout, refused) is asked only after the others,
# when theirs are not enough (`ArchiveClient.ask_all`).
QUIET = 60.0
# A round's requests at once, in a worker, to an Archive slow lately (an answer took over
# SLOW_ANSWER s, or half the timeout if less, or none came); other rounds count it as not
# answering. A resolution of an IBI no Archive holds waits for every one: with one silent
# (a machine off, a hostile one), 64 clients asking such IBIs, 3 a second, held all 16
# threads, others' resolutions 15-20 s instead of 7 ms (the eighth adversarial pass). An
# answer is milliseconds (a few hundred across an ocean); a 2.5 s bound was held by 7 a second.
SLOW_AT_ONCE, SLOW_ANSWER = 1, 1.0
_NOT_ASKED, _GIVEN_UP = "not asked: the round was over", "no answer when the round was over"


class _Stale(Exception):
    """A kept connection the Archive had closed: nothing was answered on it."""


class Refusal(ArchiveError):
    """An Archive's answer with a status of 300 or more (`status`)."""

    def __init__(self, message: str, status: int):
        super().__init__(message)
        self.status = status


class LeftOut(ArchiveError):
    """A request not sent, or given up, because its round was over."""


class _InFlight:
    """The sockets of one round's requests being answered, woken when the round is over.

    A round that settled, or reached its deadline, is over for its pool threads too: one
    asking a trickling Archive (a byte every 0.5 s, each within the timeout) held its thread
    to the deadline after every round, and with eight clients the pool's queue made a
    resolution wait for seconds (issue 30). `end` shuts their sockets down, so a `recv`
    returns at once, and says no request is to start any more."""

    def __init__(self):
        self._lock = threading.Lock()
        self._socks: set[socket.socket] = set()
        self.over = False
        self.failing = False  # over at its deadline: those still asked did not answer in time

    def enter(self, sock: socket.socket) -> None:
        with self._lock:
            if self.over:
                raise LeftOut(_NOT_ASKED)
            self._socks.add(sock)

    def leave(self, sock: socket.socket) -> bool:
        """False when `end` woke this socket: it is not to be kept."""
        with self._lock:
            if sock in self._socks:
                self._socks.discard(sock)
                return True
            return False

    def end(self, failing: bool) -> None:
        with self._lock:
            self.over, self.failing = True, failing
            socks, self._socks = self._socks, set()
        for sock in socks:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


@lru_cache(maxsize=4096)
def _host_port(address: str) -> tuple[str, int]:
    host, port = host_port(address)
    if not host:
        raise ValueError(f"address {address!r} names no host")
    return host, port


def _connect(address: str, timeout: float, deadline: float) -> socket.socket:
    # socket.create_connection's, but no address is tried past the deadline: it gave each of
    # a name's addresses the full timeout, so a name with many unreachable ones held the
    # thread for as many timeouts.
    host, port = _host_port(address)
    error: Exception = ArchiveError("no time left before the deadline to connect")
    for family, kind, proto, _, where in lookups.addresses(host, port, deadline):
        left = min(timeout, deadline - time.monotonic())
        if left <= 0:
            break
        sock = socket.socket(family, kind, proto)
        try:
            sock.settimeout(left)
            sock.connect(where)
        except OSError as exc:
            sock.close()
            error = exc
            continue
        # A request goes in one write; without this, the kernel may hold an answer's ACK back.
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        lookups.reached(host, port, str(where[0]))
        sock.settimeout(None)
        _wait_at_most(sock, timeout)
        return sock
    raise error


def _wait_at_most(sock: socket.socket, seconds: float) -> None:
    """Each `send` and `recv` on `sock` waits at most `seconds` (the kernel's timeouts; the
    socket blocking for Python): Python's own timeout polls before every call, and setting
    it is an ioctl each time, two of a kept exchange's six system calls more than it needs,
    each letting go of the interpreter (issue 35). Past it a call fails with EAGAIN."""
    whole = int(seconds)
    # At least a microsecond: a zero timeout is none at all for the kernel.
    when = struct.pack("ll", whole, max(0 if whole else 1, int((seconds - whole) * 1e6)))
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, when)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, when)


def _why(exc: BaseException) -> str:
    if isinstance(exc, TimeoutError):
        return f"timed out: {exc}" if str(exc) else "timed out"
    return str(exc) or type(exc).__name__


def encode_query(params: Mapping[str, str]) -> str:
    def enc(text: str) -> str:
        return quote(text.encode("utf-8", "surrogateescape"), safe=_SAFE)

    return "&".join(f"{enc(name)}={enc(value)}" for name, value in params.items())


class _Kept:
    """One connection to an Archive, kept open between requests; `waits`: how long each of
    its sends and receives waits at most now (`_wait_at_most`)."""

    __slots__ = ("sock", "waits")

    def __init__(self, sock: socket.socket, waits: float):
        self.sock, self.waits = sock, waits

    def close(self) -> None:
        self.sock.close()

    def dropped(self) -> bool:
        """Whether the Archive has closed this idle connection (or sent what it should
        not): a kept connection that can be read from before it was written to."""
        try:
            return spoke_while_idle(self.sock)
        except (OSError, ValueError):
            return True


class ArchiveClient:
    """HTTP to Archives: each connection to an Archive is kept open and reused by the next
    request (a new TCP connection per request cost more than the Archive's answer).

    Each answer is read by httptools (llhttp, Node.js's HTTP parser, as uvicorn uses it),
    the idle connections are kept here, a few per Archive, most recently used first. CPU per
    request (bench/archive_client.py): 36 us, against 207 us through urllib3's pools and 67 us
    with h11; at a resolution's two requests (urlRequest, acknowledgment) urllib3 was about a
    third of the resolver's CPU. The pools and the thread pool are made on first use in each
    process, so a gunicorn master that builds the app before forking owns neither sockets
    nor threads its workers would share or lose."""

    def __init__(
        self,
        timeout: float,
        pool_size: int = 32,
        pseudonym: str | None = None,
        connections: int = 4,
    ):
        self.timeout = timeout
        self.pool_size = pool_size
        self.connections = connections  # kept open per Archive
        self.pseudonym = pseudonym or new_pseudonym()
        self._lock = threading.Lock()
        self._pool: ThreadPoolExecutor | None = None
        self._idle: OrderedDict[str, list[_Kept]] = OrderedDict()
        self._quiet: dict[str, float] = {}  # address: until when it is asked last
        # address: until when it is not waited for even as the IBI's naming authority (it
        # gave no answer by a round's deadline; `_quiet` also has those merely slower than
        # another Archive, which a faster one could otherwise make lose its own IBIs)
        self._failing: dict[str, float] = {}
        self._slow: dict[str, float] = {}  # address: until when it is asked SLOW_AT_ONCE at once
        self._asking: Counter[str] = Counter()  # address: a round's requests under way
        self._pid = 0

    def _executor(self) -> ThreadPoolExecutor:
        self._own()
        return self._pool

    def _own(self) -> None:
        if self._pid == own_pid():  # asked on every request: the lock only after a fork
            return
        with self._lock:
            if self._pid != own_pid():
                self._pool = ThreadPoolExecutor(self.pool_size, thread_name_prefix="archive")
                self._idle = OrderedDict()  # a parent's connections are the parent's
                self._pid = own_pid()

    def close(self) -> None:
        """Close the idle connections (a process's end closes them anyway)."""
        with self._lock:
            idle, self._idle = self._idle, OrderedDict()
        for kept in idle.values():
            for connection in kept:
                connection.close()

    def _checkout(self, address: str) -> _Kept | None:
        """An idle connection to `address` still open, or None."""
        with self._lock:
            kept = self._idle.get(address)
            while kept:
                connection = kept.pop()
                if not connection.dropped():
                    return connection
                connection.close()
        return None

    def _checkin(self, address: str, connection: _Kept) -> None:
        closing = []
        with self._lock:
            kept = self._idle.setdefault(address, [])
            self._idle.move_to_end(address)
            if len(kept) < self.connections:
                kept.append(connection)
            else:  # more were open at once than are kept
                closing.append(connection)
            while len(self._idle) > MAX_ARCHIVES:  # the least recently asked Archive's go
                closing.extend(self._idle.popitem(last=False)[1])
        for connection in closing:
            connection.close()

    def get(
        self,
        archive: ArchiveRef,
        params: Mapping[str, str],
        via: str = "",
        deadline: float | None = None,
        inflight: _InFlight | None = None,
    ) -> list[tuple[str, str]]:
        """One request to an Archive service; its list of pairs, or ArchiveError.

        `via`: the Via header of the request being resolved, which this one continues.
        `deadline` (time.monotonic()): past it, an answer still arriving is given up at its
        next piece (each piece waits `timeout` at most); `timeout` + 0.5 s from now when not
        given, so that an Archive sending pieces for ever (a trickle, endless 1xx answers)
        holds no thread for ever. No redirect is followed (the service answers where the
        Archive said it does). `inflight`: the round this request is part of (its end wakes
        the request, LeftOut).

        An Archive that gave no complete answer (none by the deadline, a trickle, refused, not
        HTTP, or still answering when its round was over) is set aside for QUIET seconds
        (`ask_all`); one that answers is no longer."""
        self._own()
        if deadline is None:
            deadline = time.monotonic() + self.timeout + 0.5
        via = ", ".join(filter(None, (via.strip(), f"1.1 {self.pseudonym}")))
        if _CONTROL.search(f"{archive.serviceibi}{archive.address}{via}"):
            # From the registry, and a header gunicorn parsed; a line break in one would
            # write headers, or a second request, of someone else's choosing.
            raise ArchiveError("request not sent: a control character in its line or headers")
        request = (
            f"GET /{archive.serviceibi}?{encode_query(params)} HTTP/1.1\r\n"
            f"Host: {archive.address}\r\nUser-Agent: {USER_AGENT}\r\nVia: {via}\r\n\r\n"
        )
        try:
            status, body = self._exchange(
                archive.address, request.encode("latin-1"), deadline, inflight
            )
        except LeftOut as exc:
            if exc.args[0] != _NOT_ASKED:
                self._set_aside(archive.address, inflight.failing)
            raise
        except ArchiveError:  # a trickle past the deadline too: not only a silent Archive
            self._set_aside(archive.address, True)
            raise
        except (OSError, ValueError, UnicodeEncodeError) as exc:
            if inflight is not None and inflight.over:  # woken: its socket shut down
                self._set_aside(archive.address, inflight.failing)
                raise LeftOut(_GIVEN_UP) from None
            self._set_aside(archive.address, True)
            raise ArchiveError(f"no answer ({_why(exc)})") from None
        self._quiet.pop(archive.address, None)
        self._failing.pop(archive.address, None)
        if status >= 300:
            # Quoted in log lines: its line breaks and escapes would be lines of ours.
            detail = shown(body[:300].decode("ascii", "replace").strip())
            raise Refusal(f"HTTP {status}" + (f": {detail}" if detail else ""), status)
        try:
            return pairsmod.parse(body.decode("ascii"), most=MAX_PAIRS)
        except (UnicodeDecodeError, pairsmod.PairsError) as exc:
            self._set_aside(archive.address, True)  # asked first, it would cost each round
            raise ArchiveError(f"answer is not a list of pairs ({exc})") from None

    def _asked(
        self,
        archive: ArchiveRef,
        params: Mapping[str, str],
        via: str,
        deadline: float,
        inflight: _InFlight | None = None,
    ) -> list[tuple[str, str]]:
        """A round's request to `archive` (`get`), unless it was slow lately and SLOW_AT_ONCE
        of them are under way (ArchiveError: it did not answer). A request that takes more
        than SLOW_ANSWER (half the timeout if less), answered or not, makes it slow for QUIET
        seconds; an answer within it makes it no longer slow."""
        address, start = archive.address, time.monotonic()
        with self._lock:
            if self._slow.get(address, 0) > start and self._asking[address] >= SLOW_AT_ONCE:
                raise ArchiveError("not asked: slow lately, and already asked by another round")
            self._asking[address] += 1
        answered = False
        try:
            pairs = self.get(archive, params, via, deadline, inflight)
            answered = True
            return pairs
        finally:
            took = time.monotonic() - start
            with self._lock:
                self._asking[address] -= 1
                if not self._asking[address]:
                    del self._asking[address]
                if took > min(SLOW_ANSWER, self.timeout / 2):
                    self._slow[address] = time.monotonic() + QUIET
                elif answered:
                    self._slow.pop(address, None)

    def _set_aside(self, address: str, failing: bool) -> None:
        until = time.monotonic() + QUIET
        self._quiet[address] = until
        if failing:
            self._failing[address] = until

    def _exchange(
        self, address: str, request: bytes, deadline: float, inflight: _InFlight | None = None
    ) -> tuple[int, bytes]:
        """Send `request` on a kept connection, or a new one; its status and body.

        A kept connection the Archive closed just as it was taken (its keep-alive ended)
        gives no byte of answer: the request goes once more on a new connection, as a
        browser does. Not after a byte came: the Archive had the request then."""
        if inflight is not None and inflight.over:
            raise LeftOut(_NOT_ASKED)
        connection = self._checkout(address)
        if connection is not None:
            try:
                return self._on(address, connection, request, deadline, inflight)
            except _Stale:
                if inflight is not None and inflight.over:  # woken, not closed by the Archive
                    raise LeftOut(_GIVEN_UP) from None
        connection = _Kept(_connect(address, self.timeout, deadline), self.timeout)
        try:
            return self._on(address, connection, request, deadline, inflight)
        except _Stale:
            raise ConnectionResetError("the Archive closed the connection") from None

    def _on(
        self,
        address: str,
        connection: _Kept,
        request: bytes,
        deadline: float,
        inflight: _InFlight | None = None,
    ) -> tuple[int, bytes]:
        sock, answer = connection.sock, AnswerReader()
        heard = False
        try:
            if inflight is not None:
                inflight.enter(sock)
            if connection.waits != self.timeout:  # cut short near a deadline last time
                _wait_at_most(sock, self.timeout)
                connection.waits = self.timeout
            try:
                sock.sendall(request)
            except (BrokenPipeError, ConnectionResetError):
                raise _Stale() from None
            except BlockingIOError:  # the kernel's timeout (`_wait_at_most`)
                raise TimeoutError("timed out") from None
            while not answer.complete:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise ArchiveError(f"answer not complete within {self.timeout:g} s")
                cut = left < self.timeout
                if cut:  # no piece is waited for past the deadline
                    _wait_at_most(sock, left)
                    connection.waits = left
                try:
                    data = sock.recv(RECV)
                except (TimeoutError, BlockingIOError):
                    if cut or time.monotonic() >= deadline:
                        raise ArchiveError(
                            f"answer not complete within {self.timeout:g} s"
                        ) from None
                    raise TimeoutError("timed out") from None
                except ConnectionResetError:
                    if heard:
                        raise
                    raise _Stale() from None
                if not data:
                    if not heard:
                        raise _Stale()
                    if answer.headers_done and not answer.framed:  # ends where the data does
                        answer.status = answer.parser.get_status_code()
                        answer.complete, answer.extra = True, True
                        break
                    raise ConnectionResetError("the Archive closed the connection mid-answer")
                heard = True
                answer.feed(data)
        except BaseException:
            if inflight is not None:
                inflight.leave(sock)
            connection.close()
            raise
        if inflight is not None and not inflight.leave(sock):
            connection.close()  # shut down by the round's end as the answer completed
        elif answer.extra or not answer.keep_alive:
            connection.close()  # Connection: close, HTTP/1.0, or more than the answer
        else:
            self._checkin(address, connection)
        return answer.status, bytes(answer.body)

    def ask_all(
        self,
        archives: Sequence[ArchiveRef],
        params: Mapping[str, str],
        via: str = "",
        enough: Callable[[list[Answer]], bool] | None = None,
        awaited: Callable[[ArchiveRef], bool] | None = None,
    ) -> list[Answer]:
        """The same urlRequest to every Archive at once; answers in arrival order.

        Each request has its own timeout, and the round ends `timeout` + 0.5 s after it began
        whatever the pool's queue or an Archive trickling its answer; the Archives that had
        not answered by then are reported (an `error` answer). `enough(answers)`: once it is
        true, the others are waited for only as long again as those answers took (SETTLE at
        least), then left out (not reported: a slow or silent Archive delays no resolution
        that did not need it); their requests still in flight are let go at once, and those
        Archives set aside for QUIET seconds. `awaited(archive)`: an Archive whose answer is
        waited for up to the deadline even once the others' are enough, and not set aside
        unless it gave no answer by a round's deadline lately (the naming authority of the
        IBI asked about: resolve.py `ask_round`)."""
        if not archives:
            return []
        if enough:
            # Archives that gave no answer lately are asked only when the others' answers
            # are not enough: each would hold a thread of the pool for `timeout`.
            now = time.monotonic()
            if awaited:
                wanted = awaited

                def awaited(archive: ArchiveRef) -> bool:
                    return wanted(archive) and self._failing.get(archive.address, 0) <= now

            quiet = {
                a
                for a in archives
                if self._quiet.get(a.address, 0) > now and not (awaited and awaited(a))
            }
            if quiet:
                heard = [a for a in archives if a not in quiet]
                answers = self._round(heard, params, via, enough, awaited)
                if enough(answers):
                    return answers
                rest = [a for a in archives if a in quiet]
                more = self._round(rest, params, via, enough, awaited)
                return answers + [replace(a, order=len(answers) + a.order) for a in more]
        return self._round(archives, params, via, enough, awaited)

    def _round(
        self,
        archives: Sequence[ArchiveRef],
        params: Mapping[str, str],
        via: str,
        enough: Callable[[list[Answer]], bool] | None,
        awaited: Callable[[ArchiveRef], bool] | None = None,
    ) -> list[Answer]:
        if not archives:
            return []
        start = time.monotonic()
        if len(archives) == 1:
            # One Archive (the one that answered for this IBI, most of the time): asked from
            # this thread, no hand-over to the pool and back, each a wake-up that waits for
            # a CPU on a loaded machine.
            archive = archives[0]
            try:
                pairs = self._asked(archive, params, via, start + self.timeout + 0.5)
                return [Answer.of(archive, pairs)]
            except ArchiveError as exc:
                log.warning("Archive %s: %s", archive, exc)
                return [Answer(archive, {}, 0, error=str(exc))]
        # A few tasks of the shared pool each take the next Archive to ask until none is
        # left or the round is over: a Future per Archive, and a pool thread woken for each,
        # made three quarters of a thousand-Archive round's CPU.
        deadline, settle = start + self.timeout + 0.5, None
        todo = deque(enumerate(archives))
        arrived: queue.SimpleQueue[tuple[int, list | ArchiveError]] = queue.SimpleQueue()
        inflight = _InFlight()

        def work() -> None:
            while not inflight.over:
                try:
                    i, archive = todo.popleft()
                except IndexError:
                    return
                try:
                    arrived.put((i, self._asked(archive, params, via, deadline, inflight)))
                except ArchiveError as exc:
                    arrived.put((i, exc))
                except Exception as exc:  # one Archive's surprise must not end the round
                    log.exception("asking Archive %s failed", archive)
                    arrived.put((i, ArchiveError(f"no answer ({exc})")))

        pool = self._executor()
        for _ in range(min(len(archives), self.pool_size)):
            pool.submit(work)
        answers: list[Answer] = []
        unheard = set(range(len(archives)))
        waited = {i for i, a in enumerate(archives) if awaited and awaited(a)}
        try:
            while unheard:
                if settle is None or waited & unheard:
                    limit = deadline
                else:
                    limit = min(deadline, settle)
                try:
                    i, result = arrived.get(timeout=max(0.0, limit - time.monotonic()))
                except queue.Empty:
                    break
                unheard.discard(i)
                archive = archives[i]
                if isinstance(result, ArchiveError):
                    log.warning("Archive %s: %s", archive, result)
                    answers.append(Answer(archive, {}, len(answers), error=str(result)))
                else:
                    answers.append(Answer.of(archive, result, len(answers)))
                if settle is None and enough and answers[-1].pairs and enough(answers):
                    now = time.monotonic()
                    settle = now + min(max(SETTLE, now - start), self.timeout)
        finally:
            # The Archives not yet asked are not; those being asked are let go.
            inflight.end(failing=settle is None or time.monotonic() >= deadline)
        if settle is None:
            for i in sorted(unheard):
                log.warning("Archive %s: no answer within %.1f s", archives[i], self.timeout)
                answers.append(
                    Answer(
                        archives[i], {}, len(answers), error=f"no answer within {self.timeout:g} s"
                    )
                )
        return answers

    def confirm(self, archive: ArchiveRef) -> bool:
        """inclusionConfirmationRequest (Example 5.4): True when the Archive says
        `confirmation yes`."""
        return self._expect(
            "confirmation from",
            archive,
            {"servicesubject": "inclusionConfirmationRequest"},
            [("confirmation", "yes")],
        )

    def acknowledge(self, archive: ArchiveRef, params: Mapping[str, str], via: str = "") -> bool:
        """Send the acknowledgment (Table 6.11): True when the Archive answered the notice.
        ArchiveError when it gave no answer (worth sending again: `Acknowledgments`); any
        other answer is logged (sending it again would be answered the same), a 4xx too: a
        reader's long query made each of its acknowledgments 4 requests (the ninth pass)."""
        try:
            answer = self.get(archive, params, via)
        except Refusal as exc:
            if exc.status >= 500:  # the Archive's trouble, maybe over in a moment
                raise
            log.warning("acknowledgment to %s: refused: %s", archive, exc)
            return False
        if answer != [("notice", "{acknowledgment received}")]:
            # Cut: an Archive answering each with 64 KiB of pairs wrote 70 KB a reader sent to it.
            log.warning("acknowledgment to %s: unexpected answer %.300r", archive, answer)
            return False
        return True

    def _expect(
        self,
        what: str,
        archive: ArchiveRef,
        params: Mapping[str, str],
        expected: list[tuple[str, str]],
        via: str = "",
    ) -> bool:
        """Whether the Archive answers `params` with `expected`; why not is logged."""
        try:
            answer = self.get(archive, params, via)
        except ArchiveError as exc:
            log.warning("%s %s failed: %s", what, archive, exc)
            return False
        if answer != expected:
            log.warning("%s %s: unexpected answer %.300r", what, archive, answer)
            return False
        return True
