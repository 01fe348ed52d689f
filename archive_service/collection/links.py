"""`archive-service check --links` (issue 21): every link that leaves the Archive, followed.

The links: each item's `location` (where an imported item's content lives), and each relation
(`nextedition`, `translations`, `metadata`) naming an IBI this Archive does not hold, by its
persistent URL at the configured resolver (which redirects to the Archive that holds it).
Each URL is asked once however many items name it, in parallel, at most `per_host` at a
time per host (politeness: a repository is not hammered by its own mirror), each within
`timeout` seconds per network wait; redirects are followed (at most 10) and reported with a
broken link. Broken: an HTTP status of 400 or more, a failed connection, a timeout.

No web framework; urllib of the standard library (HEAD, then GET when HEAD is refused).
"""

from __future__ import annotations

import socket
import threading
import urllib.error
import urllib.request
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from urllib.parse import urlsplit

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

    def __init__(self):
        self.seen: list[str] = []

    def redirect_request(self, req, fp, code, msg, headers, newurl):
        self.seen.append(newurl)
        new = super().redirect_request(req, fp, code, msg, headers, newurl)
        if new is not None and req.get_method() == "HEAD":
            new.method = "HEAD"  # urllib would turn it into a GET
        return new


class Checker:
    def __init__(self, timeout: float = TIMEOUT, per_host: int = PER_HOST, workers: int = WORKERS):
        self.timeout, self.per_host, self.workers = timeout, per_host, workers
        self._hosts: dict[str, threading.Semaphore] = {}
        self._lock = threading.Lock()

    def _slot(self, url: str) -> threading.Semaphore:
        host = (urlsplit(url).hostname or "").lower()
        with self._lock:
            return self._hosts.setdefault(host, threading.Semaphore(self.per_host))

    def _ask(self, url: str, method: str) -> Outcome:
        recorder = _Recorder()
        opener = urllib.request.build_opener(recorder)
        request = urllib.request.Request(url, method=method, headers={"User-Agent": USER_AGENT})
        try:
            # Redirects may lead to another host: the slot is the first host's, for the
            # length of the whole chain (what that host's link costs).
            with self._slot(url), opener.open(request, timeout=self.timeout) as response:
                return Outcome(url, response.status, recorder.seen)
        except urllib.error.HTTPError as exc:
            return Outcome(url, exc.code, recorder.seen)
        except TimeoutError:
            return Outcome(url, None, recorder.seen, f"no answer within {self.timeout:g} s")
        except urllib.error.URLError as exc:
            reason = exc.reason
            if isinstance(reason, (TimeoutError, socket.timeout)):
                return Outcome(url, None, recorder.seen, f"no answer within {self.timeout:g} s")
            return Outcome(url, None, recorder.seen, f"cannot connect: {reason}")
        except (OSError, ValueError) as exc:  # a reset, a bad URL, a bad status line
            return Outcome(url, None, recorder.seen, f"failed: {exc}")

    def check(self, url: str) -> Outcome:
        outcome = self._ask(url, "HEAD")
        if outcome.status in (403, 405, 501):  # servers that refuse HEAD but serve GET
            outcome = self._ask(url, "GET")
        return outcome

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
