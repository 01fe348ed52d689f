"""One Archive's HTTP answer read by httptools' parser, bounded in head and body: what the
resolver's client (resolver/archives.py) feeds it from the socket, and the error it raises."""

from __future__ import annotations

import httptools

# The resolver asks urlRequest, confirmation and acknowledgment only. The sample
# collection's fullest urlRequest answer is 376 bytes, and each translation adds about 1 KB:
# these bounds leave room for some sixty.
MAX_ANSWER = 64 << 10
MAX_HEAD = 64 << 10  # an answer's status line and headers


class ArchiveError(Exception):
    """An Archive gave no usable answer; the message says why, for logs and alert pages."""


class AnswerReader:
    """What httptools' parser finds in one answer (its callbacks), bounded."""

    __slots__ = (
        "parser",
        "head",
        "fed",
        "body",
        "framed",
        "headers_done",
        "complete",
        "extra",
        "status",
        "keep_alive",
    )

    def __init__(self):
        self.parser = httptools.HttpResponseParser(self)
        self.head, self.fed, self.body = 0, 0, bytearray()
        self.framed = self.headers_done = self.complete = self.extra = False
        self.status, self.keep_alive = 0, False

    def on_message_begin(self) -> None:
        self.extra = self.complete  # bytes after the answer: the connection is not reused

    def on_header(self, name: bytes, value: bytes) -> None:
        if self.extra:
            return
        self.head += len(name) + len(value) + 4
        if self.head > MAX_HEAD:
            raise ArchiveError(f"answer's headers longer than {MAX_HEAD} bytes")
        if name.lower() in (b"content-length", b"transfer-encoding"):
            self.framed = True

    def on_headers_complete(self) -> None:
        self.headers_done = True

    def on_body(self, data: bytes) -> None:
        if self.extra:
            return
        self.body += data
        if len(self.body) > MAX_ANSWER:
            raise ArchiveError(f"answer longer than {MAX_ANSWER} bytes")

    def on_message_complete(self) -> None:
        if self.extra:
            return
        status = self.parser.get_status_code()
        if status < 200:  # 1xx: the answer itself follows
            self.head, self.framed, self.headers_done = 0, False, False
            self.body.clear()
            return
        # Asked now: the parser forgets once it starts on what follows.
        self.status, self.keep_alive = status, self.parser.should_keep_alive()
        self.complete = True

    def feed(self, data: bytes) -> None:
        self.fed += len(data)
        try:
            self.parser.feed_data(data)
        except (httptools.HttpParserError, httptools.HttpParserUpgrade) as exc:
            if self.complete:  # what follows the answer only ends the connection
                self.extra = True
            elif isinstance(exc.__context__, ArchiveError):  # a callback's
                raise exc.__context__ from None
            elif isinstance(exc, httptools.HttpParserUpgrade):  # not an HttpParserError
                raise ArchiveError("answer switches protocols (101 Upgrade)") from None
            else:
                raise ArchiveError(f"answer is not HTTP ({exc})") from None
        # httptools hands a header (or trailer) over only once it has all of it, gathered in
        # one growing bytes object: the callbacks' counts never see an endless one. Nor a
        # status line or a chunk's extension, which are not kept but cost CPU till the end.
        if not self.complete:
            if not self.headers_done and self.fed > MAX_HEAD:  # all of it is head so far
                raise ArchiveError(f"answer's headers longer than {MAX_HEAD} bytes")
            if self.fed > MAX_HEAD + 2 * MAX_ANSWER:
                raise ArchiveError(f"answer longer than {MAX_HEAD + 2 * MAX_ANSWER} bytes")
