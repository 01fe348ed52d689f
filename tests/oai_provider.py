"""A real OAI-PMH 2.0 data provider for the tests (issue 21): a small WSGI app over fixture
records, served on loopback by `started_provider` (the `oai_provider` fixture of conftest.py;
the benchmark starts it the same way).

It answers Identify, ListMetadataFormats and ListRecords (`oai_dc` only) with `from`/`until`,
`set`, resumption tokens (`page_size` records a page), deleted records (`<header
status="deleted">`, deletedRecord "persistent"), and the protocol's errors: badVerb,
badArgument, badResumptionToken, cannotDisseminateFormat, noRecordsMatch,
noSetHierarchy. `answers` holds
canned replies that go out before the protocol's (503 with Retry-After, a hang, a body that
is not XML, one that never ends): how a real provider misbehaves.
"""

from __future__ import annotations

import base64
import itertools
import threading
from collections import deque
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from urllib.parse import parse_qsl
from xml.sax.saxutils import escape, quoteattr

from resolver_support import ThreadedServer

OAI = "http://www.openarchives.org/OAI/2.0/"
SECONDS = "YYYY-MM-DDThh:mm:ssZ"
DAYS = "YYYY-MM-DD"
EARLIEST = datetime(2000, 1, 1, tzinfo=UTC)


def stamp(moment: datetime, granularity: str = SECONDS) -> str:
    return moment.strftime("%Y-%m-%d" if granularity == DAYS else "%Y-%m-%dT%H:%M:%SZ")


@dataclass
class OaiRecord:
    identifier: str
    datestamp: datetime
    dc: dict[str, list[str]] = field(default_factory=dict)
    sets: tuple[str, ...] = ()
    deleted: bool = False


def fixture_record(number: int, datestamp: datetime = EARLIEST, **more) -> OaiRecord:
    """Record `number` of a provider: its landing page is http://repo.example/record/N."""
    dc = {
        "title": [f"Record {number}"],
        "creator": ["Banon, Gerald"],
        "date": ["2009-07-21"],
        "language": ["en"],
        "identifier": [f"oai:repo.example:{number}", f"http://repo.example/record/{number}"],
        "type": ["Text"],
    }
    return OaiRecord(f"oai:repo.example:{number}", datestamp, dc, **more)


@dataclass
class Answer:
    """A canned reply: `body` (bytes or an iterable of bytes), sent after `delay` seconds."""

    status: str = "200 OK"
    headers: list[tuple[str, str]] = field(default_factory=list)
    body: bytes | Iterable[bytes] = b""
    delay: float = 0.0


def unavailable(retry_after: str = "1") -> Answer:
    return Answer("503 Service Unavailable", [("Retry-After", retry_after)], b"busy")


def endless(chunk: bytes = b"<a>" + b"x" * 65536 + b"</a>") -> Answer:
    """An XML body that never ends."""
    opening = f'<?xml version="1.0"?><OAI-PMH xmlns="{OAI}"><responseDate>'.encode()
    return Answer(body=itertools.chain([opening], itertools.repeat(chunk)))


class ProviderError(Exception):
    def __init__(self, code: str, text: str):
        self.code, self.text = code, text


class Provider:
    """The data provider: a WSGI app. `records` are kept in order; tests change them
    (`add`, `delete`, `touch`) while it serves."""

    def __init__(
        self,
        records: Iterable[OaiRecord] = (),
        page_size: int = 100,
        granularity: str = SECONDS,
        sets: Iterable[str] = (),
    ):
        self.records: dict[str, OaiRecord] = {r.identifier: r for r in records}
        self.page_size = page_size
        self.granularity = granularity
        self.sets = tuple(sets)
        self.answers: deque[Answer] = deque()
        self.requests: list[dict[str, str]] = []
        self.lock = threading.Lock()
        self.closing = threading.Event()
        self.url = ""

    # ------------------------------------------------------------------ what tests change

    def add(self, record: OaiRecord) -> None:
        with self.lock:
            self.records[record.identifier] = record

    def delete(self, identifier: str) -> None:
        """The record is withdrawn now: its header says deleted, its datestamp is now."""
        with self.lock:
            record = self.records[identifier]
            record.deleted, record.dc = True, {}
            record.datestamp = self.now()

    def touch(self, identifier: str, **dc: list[str]) -> None:
        with self.lock:
            record = self.records[identifier]
            record.dc.update(dc)
            record.datestamp = self.now()

    @staticmethod
    def now() -> datetime:
        return datetime.now(UTC).replace(microsecond=0)

    # ------------------------------------------------------------------ WSGI

    def __call__(self, environ, start_response) -> Iterable[bytes]:
        query = environ.get("QUERY_STRING", "")
        if environ["REQUEST_METHOD"] == "POST":
            length = int(environ.get("CONTENT_LENGTH") or 0)
            query = environ["wsgi.input"].read(length).decode("latin-1")
        pairs = parse_qsl(query, keep_blank_values=True)
        with self.lock:
            self.requests.append(dict(pairs))
            canned = self.answers.popleft() if self.answers else None
        if canned is not None:
            if canned.delay:
                self.closing.wait(canned.delay)
            start_response(canned.status, [("Content-Type", "text/xml"), *canned.headers])
            return [canned.body] if isinstance(canned.body, bytes) else canned.body
        args: dict[str, str] = {}
        verb = ""
        try:
            for name, value in pairs:
                if name in args or (name == "verb" and verb):
                    raise ProviderError("badArgument", f"{name} repeated")
                if name == "verb":
                    verb = value
                else:
                    args[name] = value
            body = self.answer(verb, args)
        except ProviderError as exc:
            request = (
                f'<request verb="{escape(verb)}">{escape(self.url)}</request>'
                if verb in VERBS
                else f"<request>{escape(self.url)}</request>"
            )
            body = f'{request}<error code="{exc.code}">{escape(exc.text)}</error>'
        start_response("200 OK", [("Content-Type", "text/xml; charset=utf-8")])
        return [self.envelope(body).encode()]

    def envelope(self, body: str) -> str:
        return (
            '<?xml version="1.0" encoding="UTF-8"?>\n'
            f'<OAI-PMH xmlns="{OAI}" '
            'xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" '
            f'xsi:schemaLocation="{OAI} http://www.openarchives.org/OAI/2.0/OAI-PMH.xsd">'
            f"<responseDate>{stamp(self.now())}</responseDate>{body}</OAI-PMH>\n"
        )

    def answer(self, verb: str, args: dict[str, str]) -> str:
        if verb not in VERBS:
            raise ProviderError("badVerb", f"{verb!r} is not an OAI-PMH verb")
        allowed = VERBS[verb]
        for name in args:
            if name not in allowed:
                raise ProviderError("badArgument", f"{verb} takes no {name!r}")
        return getattr(self, verb.lower())(args)

    def request(self, verb: str, args: dict[str, str]) -> str:
        attributes = "".join(f" {k}={quoteattr(v)}" for k, v in sorted(args.items()))
        return f'<request verb="{verb}"{attributes}>{escape(self.url)}</request>'

    def identify(self, args: dict[str, str]) -> str:
        return self.request("Identify", args) + (
            "<Identify><repositoryName>Test repository</repositoryName>"
            f"<baseURL>{escape(self.url)}</baseURL><protocolVersion>2.0</protocolVersion>"
            "<adminEmail>admin@repo.example</adminEmail>"
            f"<earliestDatestamp>{stamp(EARLIEST, self.granularity)}</earliestDatestamp>"
            "<deletedRecord>persistent</deletedRecord>"
            f"<granularity>{self.granularity}</granularity></Identify>"
        )

    def listmetadataformats(self, args: dict[str, str]) -> str:
        return self.request("ListMetadataFormats", args) + (
            "<ListMetadataFormats><metadataFormat><metadataPrefix>oai_dc</metadataPrefix>"
            "<schema>http://www.openarchives.org/OAI/2.0/oai_dc.xsd</schema>"
            "<metadataNamespace>http://www.openarchives.org/OAI/2.0/oai_dc/</metadataNamespace>"
            "</metadataFormat></ListMetadataFormats>"
        )

    def when(self, text: str, end: bool) -> tuple[datetime, str]:
        for granularity, form in ((SECONDS, "%Y-%m-%dT%H:%M:%SZ"), (DAYS, "%Y-%m-%d")):
            try:
                moment = datetime.strptime(text, form).replace(tzinfo=UTC)
            except ValueError:
                continue
            if granularity == SECONDS and self.granularity == DAYS:
                break
            if granularity == DAYS and end:
                moment = moment.replace(hour=23, minute=59, second=59)
            return moment, granularity
        raise ProviderError(
            "badArgument", f"{text!r} is not a date of granularity {self.granularity}"
        )

    def listrecords(self, args: dict[str, str]) -> str:
        if "resumptionToken" in args:
            if len(args) > 1:
                raise ProviderError("badArgument", "resumptionToken is an exclusive argument")
            token = args["resumptionToken"]
            try:
                offset, since, until, set_spec = (
                    base64.urlsafe_b64decode(token.encode()).decode().split("|")
                )
                offset = int(offset)
            except ValueError:
                raise ProviderError("badResumptionToken", f"{token!r} is not ours") from None
        else:
            if "metadataPrefix" not in args:
                raise ProviderError("badArgument", "metadataPrefix is required")
            if args["metadataPrefix"] != "oai_dc":
                raise ProviderError(
                    "cannotDisseminateFormat", f"{args['metadataPrefix']!r} is not offered"
                )
            offset, since, until, set_spec = 0, args.get("from", ""), args.get("until", ""), ""
            set_spec = args.get("set", "")
        low = self.when(since, False) if since else None
        high = self.when(until, True) if until else None
        if low and high and low[1] != high[1]:
            raise ProviderError("badArgument", "from and until differ in granularity")
        if set_spec and not self.sets:
            raise ProviderError("noSetHierarchy", "this repository has no sets")
        if set_spec and set_spec not in self.sets:
            raise ProviderError("badArgument", f"no set {set_spec!r}")
        with self.lock:
            chosen = [
                r
                for r in self.records.values()
                if (low is None or r.datestamp >= low[0])
                and (high is None or r.datestamp <= high[0])
                and (not set_spec or set_spec in r.sets)
            ]
            page = [
                record_xml(r, self.granularity) for r in chosen[offset : offset + self.page_size]
            ]
        if not chosen:
            raise ProviderError("noRecordsMatch", "no record matches")
        if offset >= len(chosen) and offset:
            raise ProviderError("badResumptionToken", "past the end of the list")
        following = offset + self.page_size
        token = ""
        if following < len(chosen) or offset:
            text = (
                base64.urlsafe_b64encode(
                    f"{following}|{since}|{until}|{set_spec}".encode()
                ).decode()
                if following < len(chosen)
                else ""
            )
            token = (
                f'<resumptionToken completeListSize="{len(chosen)}" cursor="{offset}">'
                f"{text}</resumptionToken>"
            )
        return (
            self.request("ListRecords", args) + f"<ListRecords>{''.join(page)}{token}</ListRecords>"
        )


VERBS = {
    "Identify": (),
    "ListMetadataFormats": ("identifier",),
    "ListRecords": ("from", "until", "set", "metadataPrefix", "resumptionToken"),
}


def record_xml(record: OaiRecord, granularity: str = SECONDS) -> str:
    status = ' status="deleted"' if record.deleted else ""
    sets = "".join(f"<setSpec>{escape(s)}</setSpec>" for s in record.sets)
    header = (
        f"<header{status}><identifier>{escape(record.identifier)}</identifier>"
        f"<datestamp>{stamp(record.datestamp, granularity)}</datestamp>{sets}</header>"
    )
    if record.deleted:
        return f"<record>{header}</record>"
    elements = "".join(
        f"<dc:{name}>{escape(value)}</dc:{name}>"
        for name, values in record.dc.items()
        for value in values
    )
    return (
        f"<record>{header}<metadata>"
        '<oai_dc:dc xmlns:oai_dc="http://www.openarchives.org/OAI/2.0/oai_dc/" '
        'xmlns:dc="http://purl.org/dc/elements/1.1/">'
        f"{elements}</oai_dc:dc></metadata></record>"
    )


@contextmanager
def started_provider(provider: Provider) -> Iterator[Provider]:
    """`provider` on a free loopback port (its `url` set) until the block ends."""
    server = ThreadedServer(provider, 0)
    provider.url = f"http://127.0.0.1:{server.server.server_port}/oai"
    try:
        yield provider
    finally:
        provider.closing.set()  # canned answers waiting out a delay end now
        server.close()


class Endless(Provider):
    """A provider whose list never ends (issue 30): each ListRecords page holds `page_size`
    records never listed before, each `record_bytes` long, and a new resumptionToken. It
    held a harvester's memory at 5.3 GB after a minute."""

    def __init__(self, page_size: int = 100, record_bytes: int = 30_000):
        super().__init__(page_size=page_size)
        self.filler = "x" * record_bytes
        self.pages = 0

    def listrecords(self, args: dict[str, str]) -> str:
        token = args.get("resumptionToken", "0")
        start = int(token) if token.isdigit() else 0
        with self.lock:
            self.pages += 1
        records = []
        for number in range(start, start + self.page_size):
            record = fixture_record(number + 1)
            record.dc["description"] = [self.filler]
            records.append(record_xml(record))
        following = f"<resumptionToken>{start + self.page_size}</resumptionToken>"
        return (
            self.request("ListRecords", args)
            + f"<ListRecords>{''.join(records)}{following}</ListRecords>"
        )
