"""`archive-service check --links` (issue 21): every link that leaves the Archive, followed.

The links: each item's `location` (where an imported item's content lives), and each relation
(`nextedition`, `translations`, `metadata`) naming an IBI this Archive does not hold, by its
persistent URL at the configured resolver (which redirects to the Archive that holds it).
Each URL is asked once however many items name it, in parallel, at most `per_host` at a
time per host (politeness: a repository is not hammered by its own mirror), each within
`timeout` seconds in all, whatever the server does (`common/deadline`: urllib's timeout is per
read, and headers sent a byte a second kept a 3 s check running past 300 s); redirects are
followed (at most 10) and reported with a broken link. Broken: an HTTP status of 400 or more,
a failed connection, a timeout, an internal address.

An internal address (loopback, link-local, private: `common/netguard`), whether a link's, a
name's or a redirect's, is never contacted unless `allow_internal`: it is reported as such,
the same whatever listens there (a checker that told "connection refused" from "HTTP 403"
there would be a port scanner for whoever writes the links).

No web framework; urllib of the standard library (HEAD, then GET when HEAD is refused), no
proxy from the environment (the connection is made to the checked address itself).
"""

from __future__ import annotations

import http.client
import socket
import threading
import urllib.error
import urllib.request
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from ..common import netguard
from ..common.deadline import Overdue, call_within
from .items import Item

TIMEOUT = 10.0
PER_HOST = 2
WORKERS = 16
MAX_REDIRECTS = 10
USER_AGENT = "archive-service link check (+https://urlib.net)"


@dataclass
class Link:
    url: str
    named_by: list[str] = field(default_factory=list)  # "<item directory> (location)", ...


@dataclass
class Outcome:
    url: str
    status: int | None  # the last HTTP status, None when none came
    redirects: list[str]  # the URLs redirected to, in order
    error: str | None = None  # why it failed without a status (timeout, refused ...)

    @property
    def broken(self) -> bool:
        return self.error is not None or self.status is None or self.status >= 400

    def describe(self) -> str:
        what = self.error if self.error is not None else f"HTTP {self.status}"
        if self.redirects:
            what += f" after {len(self.redirects)} redirect(s): " + " -> ".join(self.redirects)
        return what


def outside_links(
    items: Iterable[Item],
    held: Callable[[object], Item | None],
    persistent_url: Callable[[str], str | None],
) -> list[Link]:
    """The links of `items` that leave the Archive (`held(ibi)` finds what is held here;
    `persistent_url(ibi)` is the resolver's URL of an IBI, None without a resolver)."""
    links: dict[str, Link] = {}

    def add(url: str | None, why: str) -> None:
        if url is not None:
            links.setdefault(url, Link(url)).named_by.append(why)

    for item in items:
        if item.state == "Deleted":
            continue
        add(item.location, f"{item.directory} (location)")
        relations = [("nextedition", item.nextedition), ("metadata", item.metadata)]
        relations += [(f"translations {lang}", ref) for lang, ref in item.translations.items()]
        for what, ref in relations:
            if ref is not None and held(ref) is None:
                add(persistent_url(ref.text), f"{item.directory} ({what} {ref.text})")
    return sorted(links.values(), key=lambda link: link.url)


class _Recorder(urllib.request.HTTPRedirectHandler):
    max_redirections = MAX_REDIRECTS

    def __init__(self, seen: list[str]):
        self.seen = seen

    def redirect_request(self, req, fp, code, msg, headers, newurl):
        self.seen.append(newurl)
        new = super().redirect_request(req, fp, code, msg, headers, newurl)
        if new is not None and req.get_method() == "HEAD":
            new.method = "HEAD"  # urllib would turn it into a GET
        return new


class _Sockets:
    """The connections of one link's check, each to an address `netguard` let through; shut
    down when the link's time is up, so that the abandoned check ends at once."""

    def __init__(self, allow_internal: bool):
        self.allow_internal = allow_internal
        self.lock = threading.Lock()
        self.open: list[socket.socket] = []
        self.closed = False

    def connect(self, address, timeout=None, source_address=None) -> socket.socket:
        sock = netguard.connect(
            address[0], address[1], timeout, source_address, allow_internal=self.allow_internal
        )
        with self.lock:
            if self.closed:
                sock.close()
                raise TimeoutError("the link's time is up")
            self.open.append(sock)
        return sock

    def close(self) -> None:
        with self.lock:
            self.closed = True
            for sock in self.open:
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                sock.close()

    def connection(self, cls):
        def make(*args, **kwargs):
            conn = cls(*args, **kwargs)
            conn._create_connection = self.connect  # every connection, redirects' too
            return conn

        return make


def _opener(sockets: _Sockets, seen: list[str]) -> urllib.request.OpenerDirector:
    """http and https through `sockets` and nothing else: no proxy, no ftp:, no file: (a
    redirect there is an unknown URL type)."""

    class Http(urllib.request.HTTPHandler):
        def http_open(self, req):
            return self.do_open(sockets.connection(http.client.HTTPConnection), req)

    class Https(urllib.request.HTTPSHandler):
        def https_open(self, req):
            return self.do_open(
                sockets.connection(http.client.HTTPSConnection), req, context=self._context
            )

    opener = urllib.request.OpenerDirector()
    for handler in (
        Http(),
        Https(),
        _Recorder(seen),
        urllib.request.UnknownHandler(),
        urllib.request.HTTPDefaultErrorHandler(),
        urllib.request.HTTPErrorProcessor(),
    ):
        opener.add_handler(handler)
    return opener


class Checker:
    def __init__(
        self,
        timeout: float = TIMEOUT,
        per_host: int = PER_HOST,
        workers: int = WORKERS,
        allow_internal: bool = False,
    ):
        self.timeout, self.per_host, self.workers = timeout, per_host, workers
        self.allow_internal = allow_internal
        self._hosts: dict[str, threading.Semaphore] = {}
        self._lock = threading.Lock()

    def _slot(self, url: str) -> threading.Semaphore:
        host = (urlsplit(url).hostname or "").lower()
        with self._lock:
            return self._hosts.setdefault(host, threading.Semaphore(self.per_host))

    def _ask(self, url: str, method: str, opener, seen: list[str]) -> Outcome:
        request = urllib.request.Request(url, method=method, headers={"User-Agent": USER_AGENT})
        late = f"no answer within {self.timeout:g} s"
        try:
            with opener.open(request, timeout=self.timeout) as response:
                return Outcome(url, response.status, list(seen))
        except urllib.error.HTTPError as exc:
            return Outcome(url, exc.code, list(seen))
        except TimeoutError:
            return Outcome(url, None, list(seen), late)
        except urllib.error.URLError as exc:
            reason = exc.reason
            if isinstance(reason, netguard.InternalAddress):
                return Outcome(url, None, list(seen), f"{reason} (allow_internal: no)")
            if isinstance(reason, (TimeoutError, socket.timeout)):
                return Outcome(url, None, list(seen), late)
            return Outcome(url, None, list(seen), f"cannot connect: {reason}")
        except (OSError, ValueError, http.client.HTTPException) as exc:
            return Outcome(url, None, list(seen), f"failed: {exc}")  # a reset, a bad URL …

    def _follow(self, url: str, sockets: _Sockets, seen: list[str]) -> Outcome:
        opener = _opener(sockets, seen)
        outcome = self._ask(url, "HEAD", opener, seen)
        if outcome.status in (403, 405, 501):  # servers that refuse HEAD but serve GET
            seen.clear()
            outcome = self._ask(url, "GET", opener, seen)
        return outcome

    def check(self, url: str) -> Outcome:
        """`url` followed, in `timeout` seconds at most whatever the server does."""
        sockets, seen = _Sockets(self.allow_internal), []
        # Redirects may lead to another host: the slot is the first host's, for the
        # length of the whole chain (what that host's link costs).
        with self._slot(url):
            try:
                return call_within(
                    self.timeout, lambda: self._follow(url, sockets, seen), "link check"
                )
            except Overdue:
                return Outcome(url, None, list(seen), f"no answer within {self.timeout:g} s")
            finally:
                sockets.close()

    def check_all(
        self, links: list[Link], progress: Callable[[int, int], object] | None = None
    ) -> list[tuple[Link, Outcome]]:
        done = 0
        lock = threading.Lock()

        def one(link: Link) -> tuple[Link, Outcome]:
            nonlocal done
            outcome = self.check(link.url)
            with lock:
                done += 1
                if progress is not None:
                    progress(done, len(links))
            return link, outcome

        # Round robin over the hosts: workers held up by one host's limit do not keep the
        # others waiting behind it.
        by_host: dict[str, list[Link]] = {}
        for link in links:
            by_host.setdefault((urlsplit(link.url).hostname or "").lower(), []).append(link)
        queues = list(by_host.values())
        ordered = [
            q[i] for i in range(max(map(len, queues), default=0)) for q in queues if i < len(q)
        ]
        with ThreadPoolExecutor(max_workers=self.workers) as pool:
            return list(pool.map(one, ordered))
