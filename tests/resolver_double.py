"""A stand-in for the outside resolver (urlib.net): a real HTTP server on loopback.

It records every request and, like the real resolver, answers an inclusionRequest only after
calling the Archive back with inclusionConfirmationRequest at http://<archiveaddress>/<svc>.
"""

from __future__ import annotations

import threading
import time
import urllib.request
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qsl, urlsplit

from archive_service.serve import announce

# The Archive the announcer's tests announce, and its registration key.
SERVICE = "sid.inpe.br/mtc-m18@80/2008/03.17.15.17"
KEY = "9876543210-0123456789"


def loopback_announcement(resolver_url: str, address: str = "127.0.0.1:9") -> announce.Announcement:
    """The announcement of that Archive, at `address` on loopback, to `resolver_url`."""
    return announce.Announcement.build(
        resolver_url,
        archiveaddress=address,
        archiveserviceibi=SERVICE,
        archiveip="127.0.0.1",
        archiveplatformversion="test",
        archiveadmemailaddress="admin@example.org",
        registrationkey=KEY,
        exclusion_timeout=2.0,
    )


@dataclass
class Received:
    subject: str
    pairs: dict[str, str]
    raw_query: str
    confirmation: str | None = None  # body the Archive gave to the confirmation call-back


@dataclass
class ResolverDouble:
    """`mode`: "ok"; "fail N" (HTTP 503 N times, then ok); "garbage" (200, not pairs)."""

    mode: str = "ok"
    delay: float = 0.0  # seconds before answering anything (a slow resolver)
    received: list[Received] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    failures: int = 0

    def start(self) -> ResolverDouble:
        double = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                double.handle(self)

            def log_message(self, *args) -> None:  # keep test output quiet
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/J8LNKB5R7W/3FUQHC5"
        self.thread = threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True)
        self.thread.start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def handle(self, request: BaseHTTPRequestHandler) -> None:
        raw = urlsplit(request.path).query
        query = dict(parse_qsl(raw, keep_blank_values=True))
        received = Received(query.get("servicesubject", ""), query, raw)
        with self.lock:
            self.received.append(received)
        if self.delay:
            time.sleep(self.delay)
        if self.mode.startswith("fail") and self.failures < int(self.mode.split()[1]):
            self.failures += 1
            return self.reply(request, 503, "busy")
        if self.mode == "garbage":
            return self.reply(request, 200, "<html>\n<title>Oops</title>\n</html>")
        if received.subject == "inclusionRequest":
            url = (
                f"http://{query['archiveaddress']}/{query['archiveserviceibi']}"
                "?servicesubject=inclusionConfirmationRequest"
            )
            try:
                with urllib.request.urlopen(url, timeout=5) as answer:
                    received.confirmation = answer.read().decode("ascii")
            except OSError as exc:
                received.confirmation = f"failed: {exc}"
            outcome = (
                "successful" if received.confirmation == "confirmation yes" else "unsuccessful"
            )
            return self.reply(
                request, 200, f"status.archive included\r\nstatus.confirmation {outcome}"
            )
        if received.subject == "exclusionRequest":
            return self.reply(request, 200, "status.archive excluded")
        return self.reply(request, 400, "error {unknown servicesubject}")

    @staticmethod
    def reply(request: BaseHTTPRequestHandler, status: int, body: str) -> None:
        data = body.encode("ascii")
        try:
            request.send_response(status)
            request.send_header("Content-Type", "text/plain")
            request.send_header("Content-Length", str(len(data)))
            request.end_headers()
            request.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):  # the Archive stopped waiting: fine
            pass

    def subjects(self) -> list[str]:
        with self.lock:
            return [r.subject for r in self.received]

    def wait_for(
        self, count: int, subject: str, timeout: float = 30.0, answered: bool = True
    ) -> list[Received]:
        """The requests with `subject` once there are `count` of them (AssertionError if not);
        with `answered`, an inclusion counts once its confirmation call-back is done."""
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            with self.lock:
                found = [r for r in self.received if r.subject == subject]
            if len(found) >= count and (
                not answered
                or all(r.confirmation is not None for r in found if subject == "inclusionRequest")
            ):
                return found
            time.sleep(0.05)
        raise AssertionError(
            f"expected {count} {subject} within {timeout} s; got {self.subjects()}"
        )
