"""Harvesting an OAI-PMH data provider (issue 21): its `oai_dc` records become `Record`s.

The harvester is oaipmh-scythe (BSD-3-Clause; its client, its resumption-token iterator and its
OAI error classes). What it leaves loose for a command an admin runs against someone else's
server is tightened here, in `_Scythe.harvest`: each response is streamed into a strict lxml
parser (no recovery: a page that is not XML is an error, not an early end of the list; no
entity expansion, no DTD, no network, libxml2's own depth and size limits), cut off past
`Limits.max_bytes` or `Limits.timeout` for the whole response (its headers included); a 503
or 429 is retried after its Retry-After (seconds or an HTTP date, capped); a resumption token
sent twice is a loop.

A harvest is streamed (imports/apply.py takes its records in batches: memory does not grow
with their number, an endless provider held 5.3 GB after a minute) and capped: records,
bytes, seconds, and the seconds Retry-After may add up to (`Limits`, from the `oai_max_*`
settings). A cap reached ends the records there, `Harvest.stopped` saying which.

Connections go through `common/netguard`: the base URL's host is trusted as the admin gave
it; any other host a redirect leads to is refused when it is or resolves to an internal
address (unless `Limits.allow_internal`).

A record becomes a `Record`: source id = the OAI identifier, location = its first http(s)
`dc:identifier` (its landing page), its Dublin Core (the fifteen elements; the sidecar has
no place for others) as the item's inline `dc`, an Archive's `dc:relation` values naming a
record of the same provider (oai/records.py) as its relations; a deleted header becomes
`deleted=True`. A
record that cannot be an item (no landing page, no `oai_dc`, a `dc` too large for a sidecar)
is skipped and reported in `Harvest.skipped`, the rest go on.

No web framework here.
"""

from __future__ import annotations

import dataclasses
import email.utils
import hashlib
import json
import socket
import sys
import time
from collections import deque
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpcore2
import httpx2
import oaipmh_scythe
from httpcore2._backends.sync import SyncStream  # the stream SyncBackend wraps a socket in
from lxml import etree
from oaipmh_scythe.iterator import OAIItemIterator

from .. import __version__
from ..collection import sidecar
from ..common import files, netguard
from ..common.deadline import Overdue, call_within
from ..common.yamlsafe import dump_sidecar
from ..oai import records as ours
from . import oaixml
from .records import EDITION_OF, METADATA_OF, TRANSLATION_OF, Record

OAI = "{http://www.openarchives.org/OAI/2.0/}"
OAI_DC = "{http://www.openarchives.org/OAI/2.0/oai_dc/}dc"
DC = "{http://purl.org/dc/elements/1.1/}"
SECONDS, DAYS = "YYYY-MM-DDThh:mm:ssZ", "YYYY-MM-DD"
# The provider's date of each source's last harvest applied, the next run's `from`.
HARVESTS_FILE = "oai-pmh.json"
# An item's inline dc lives in its sidecar, which holds at most sidecar.MAX_BYTES: a record
# whose Dublin Core alone comes near it is skipped rather than written unreadable.
MAX_DC_BYTES = sidecar.MAX_BYTES // 2
# Lines kept of the records skipped (each is counted): an endless list of them is no memory.
MAX_SKIPPED_LINES = 1000
# Record identifiers a harvest remembers to tell a page of new records from a list going
# round (8 bytes each, some 15 MB at most).
MAX_REMEMBERED = 200_000
# dc:relation values "<name> <OAI identifier>" (an Archive's, oai/records.py) -> the relation
# of the record that carries them (imports/records.py).
RELATION_OF = {
    ours.IS_NEXT_EDITION_OF: EDITION_OF,
    ours.IS_METADATA_OF: METADATA_OF,
    ours.HAS_TRANSLATION: TRANSLATION_OF,
}
# Records held back until the record their edition_of / metadata_of names is yielded (the
# import refuses a relation to a record it has not met yet); past this many, they go as
# they are.
MAX_HELD = 10_000
# And this many bytes of them (their Dublin Core, identifiers and where they came from):
# a record may carry 32 KiB of Dublin Core, and a hostile provider's records each naming one
# it never lists took the import from 87 to 337 MB at 9,000 (issue 30, eighth pass). Bytes,
# not characters: 740 one-letter values (32 KiB) were 740, 76 bytes each (twelfth pass).
MAX_HELD_BYTES = 64_000_000
# The longest record identifier taken (a URI; oai:<host>:<id> is some 60 characters): one
# went whole into each line, held record and mapping row it appeared in: the 1,000 lines
# kept of skipped records were counted in lines, so a provider's 1 MB identifiers stayed as
# long as the import ran, 1 GB for 1,000 (issue 30, eighth adversarial pass).
MAX_IDENTIFIER = 1024


class HarvestError(Exception):
    """The harvest cannot go on: the message says what the provider did and at which URL."""


@dataclass(frozen=True)
class Limits:
    timeout: float = 60.0  # seconds: to connect, for each read, and for a whole response
    max_bytes: int = 32 * 1024 * 1024  # one response (a page of 100 records is ~0.3 MB)
    max_elements: int = 500_000  # its XML elements (oaixml.Reader; a page holds thousands)
    retries: int = 5  # of one request answered 503 or 429
    max_wait: float = 600.0  # the longest Retry-After waited for (else the harvest stops)
    default_wait: float = 10.0  # a 503 that names no Retry-After
    # ListRecords pages in a row with no record not listed before in the harvest (a few empty
    # pages are usual: DSpace leaves out withdrawn items after paging): a list going round.
    max_stale_pages: int = 100
    # One harvest in all (the oai_max_* settings): then it stops, what was taken kept.
    max_records: int = 1_000_000
    max_total_bytes: int = 20_000_000_000
    max_seconds: float = 86400.0
    max_retry_wait: float = 3600.0  # Retry-After waits added up
    allow_internal: bool = False  # redirects to another host may reach internal addresses

    @classmethod
    def of(cls, config: Mapping[str, Any]) -> Limits:
        """The limits the settings give."""
        return cls(
            max_records=config["oai_max_records"],
            max_total_bytes=config["oai_max_bytes"],
            max_seconds=config["oai_max_seconds"],
            max_retry_wait=config["oai_max_retry_wait"],
            allow_internal=config["allow_internal"],
        )


class _Cap(Exception):
    """A cap of the whole harvest reached: the records end here (`Harvest.stopped`)."""


class _Guarded(httpcore2.SyncBackend):
    """Connections to the checked addresses only (common/netguard); `trusted`: the base
    URL's host, connected to as given."""

    def __init__(self, trusted: str, allow_internal: bool):
        self.trusted, self.allow_internal = trusted.lower(), allow_internal

    def connect_tcp(self, host, port, timeout=None, local_address=None, socket_options=None):
        try:
            sock = netguard.connect(
                host,
                port,
                timeout,
                None if local_address is None else (local_address, 0),
                allow_internal=self.allow_internal or host.lower() == self.trusted,
            )
        except netguard.InternalAddress:
            raise
        except TimeoutError as exc:  # as httpcore's own backend maps them
            raise httpcore2.ConnectTimeout(exc) from exc
        except OSError as exc:
            raise httpcore2.ConnectError(exc) from exc
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return SyncStream(sock)


def since(text: str) -> str:
    """A `from` date as OAI-PMH writes it (YYYY-MM-DD or YYYY-MM-DDThh:mm:ssZ), checked."""
    text = text.strip()
    for form in ("%Y-%m-%dT%H:%M:%SZ", "%Y-%m-%d"):
        try:
            datetime.strptime(text, form)
        except ValueError:
            continue
        return text
    raise ValueError(f"{text!r} is not YYYY-MM-DD or YYYY-MM-DDThh:mm:ssZ (UTC)")


def _retry_after(value: str | None, default: float) -> float:
    if value is None or not value.strip():
        return default
    value = value.strip()
    # ASCII digits only: "²" (latin-1 0xB2 in a header) is a digit to isdigit, not to float.
    if value.isascii() and value.isdigit():
        return float(value)
    try:
        moment = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return default
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return max(0.0, (moment - datetime.now(UTC)).total_seconds())


@dataclass
class _Parsed(oaipmh_scythe.OAIResponse):
    """A response parsed once (scythe's own parses the body again on every look)."""

    root: Any = None

    @property
    def xml(self):  # noqa: D102 (scythe's attribute)
        return self.root


class _Scythe(oaipmh_scythe.Scythe):
    def __init__(self, url: str, limits: Limits, sleep: Callable[[float], None]):
        agent = f"archive-service/{__version__} {oaipmh_scythe.HTTPConfig().user_agent}"
        super().__init__(
            url,
            http_config=oaipmh_scythe.HTTPConfig(timeout=limits.timeout, user_agent=agent),
            class_mapping={"ListRecords": lambda element: element},
        )
        self.limits, self.sleep = limits, sleep
        self.tokens: set[bytes] = set()  # digests: a provider's tokens may be long
        self.responses, self.response_date = 0, ""
        # The identifiers listed so far, as short digests, the latest MAX_REMEMBERED only:
        # a list going round further back than that is stopped by the caps.
        self.identifiers: set[bytes] = set()
        self.remembered: deque[bytes] = deque()
        self.stale_pages = 0
        self.bytes, self.waited = 0, 0.0
        self.ends = time.monotonic() + limits.max_seconds
        self.guard = _Guarded(httpx2.URL(url).host, limits.allow_internal)

    @property
    def client(self) -> httpx2.Client:
        """scythe's client, through the guarded transport."""
        if self._client is None or self._client.is_closed:
            self._client = httpx2.Client(
                headers={
                    "Accept": "text/xml; charset=utf-8, application/xml; charset=utf-8",
                    "user-agent": self.http_config.user_agent,
                },
                timeout=self.timeout,
                transport=self._transported(),
            )
        return self._client

    def _transported(self) -> httpx2.HTTPTransport:
        """httpx's transport, its connections made by the guard. No proxy from the
        environment: the connection is made to the checked address itself."""
        transport = httpx2.HTTPTransport(trust_env=False)
        transport._pool._network_backend = self.guard  # httpcore's one hook for connecting
        return transport

    def left(self) -> float:
        """Seconds left of the harvest's time (oai_max_seconds); _Cap when none."""
        left = self.ends - time.monotonic()
        if left <= 0:
            raise _Cap(f"the harvest reached oai_max_seconds ({self.limits.max_seconds:g} s)")
        return left

    def harvest(self, query: dict[str, str]) -> oaipmh_scythe.OAIResponse:
        token = query.get("resumptionToken")
        if token is not None:
            digest = hashlib.sha256(token.encode()).digest()
            if digest in self.tokens:
                raise HarvestError(
                    f"{self.endpoint}: resumptionToken {token[:200]!r} sent a second time (a loop)"
                )
            self.tokens.add(digest)
        for attempt in range(self.limits.retries + 1):
            status, headers, root = self._fetch(query)
            if status not in (429, 503) or attempt == self.limits.retries:
                break
            wait = _retry_after(headers.get("retry-after"), self.limits.default_wait)
            if wait > self.limits.max_wait:
                raise HarvestError(
                    f"{self.endpoint}: HTTP {status}, retry after {wait:.0f} s "
                    f"(more than {self.limits.max_wait:.0f} s): try again later"
                )
            if self.waited + wait > self.limits.max_retry_wait:
                raise _Cap(
                    f"the provider's Retry-After waits would pass oai_max_retry_wait "
                    f"({self.limits.max_retry_wait:g} s in all)"
                )
            if wait >= self.left():
                raise _Cap(f"the harvest reached oai_max_seconds ({self.limits.max_seconds:g} s)")
            self.waited += wait
            self.sleep(wait)
        if root is None:
            tries = f" (tried {self.limits.retries + 1} times)" if status in (429, 503) else ""
            raise HarvestError(f"{self.endpoint}: HTTP {status} to {_verb(query)}{tries}")
        if root.tag != OAI + "OAI-PMH":
            raise HarvestError(
                f"{self.endpoint}: the answer to {_verb(query)} is not OAI-PMH "
                f"(its root element is {root.tag!r})"
            )
        date = root.findtext(OAI + "responseDate")
        if date:
            # Only a date the next run can send as `from`: another (a fraction, an offset)
            # would be refused by the provider on every run until --from was given.
            self.responses += 1
            try:
                self.response_date = since(date)
            except ValueError:
                self.response_date = ""
        response = _Parsed(http_response=None, params=query, root=root)
        response.raise_for_oaipmh_error()
        if status != 200:
            raise HarvestError(f"{self.endpoint}: HTTP {status} to {_verb(query)}")
        if _verb(query) == "ListRecords":
            self._count_new(root)
        return response

    def _count_new(self, root) -> None:
        """A new token with each page but never a new record (a cursor that does not move,
        an empty list for ever) is a loop no repeated token shows: stop it."""
        page = root.find(OAI + "ListRecords")
        listed = () if page is None else page.iterfind(f"{OAI}record/{OAI}header/{OAI}identifier")
        digests = {_digest((e.text or "").strip()) for e in listed}
        new = digests - self.identifiers
        self.identifiers |= new
        self.remembered.extend(new)
        while len(self.remembered) > MAX_REMEMBERED:
            self.identifiers.discard(self.remembered.popleft())
        self.stale_pages = 0 if new else self.stale_pages + 1
        if self.stale_pages >= self.limits.max_stale_pages:
            raise HarvestError(
                f"{self.endpoint}: {self.stale_pages} pages in a row of ListRecords with a "
                "new resumptionToken each and no record not listed before (a loop)"
            )

    def _fetch(self, query: dict[str, str]) -> tuple[int, Any, Any]:
        """(status, headers, root element or None for an error status without XML).

        Asked in a thread of its own and waited for at most `Limits.timeout` (and a second
        for the request's own timeouts to say it first): httpx's timeouts are per read, and
        a provider that sent its headers a byte at a time, each within the read timeout,
        held the harvest for as long as it liked (the body's deadline began after them)."""
        left = self.left()
        try:
            return call_within(
                min(self.limits.timeout, left) + 1, lambda: self._read(query), "oai-pmh request"
            )
        except Overdue:
            self.client.close()  # the worker's next read fails; it ends within a read timeout
            self.left()
            raise HarvestError(
                f"{self.endpoint} ({_verb(query)}): no answer within "
                f"{self.limits.timeout:g} s (timed out)"
            ) from None

    def _read(self, query: dict[str, str]) -> tuple[int, Any, Any]:
        what = f"{self.endpoint} ({_verb(query)})"
        deadline = min(time.monotonic() + self.limits.timeout, self.ends)
        parser = oaixml.Reader(self.limits.max_elements)
        try:
            with self.client.stream(
                "GET", self.endpoint, params=query, follow_redirects=True
            ) as response:
                status, headers = response.status_code, response.headers
                # An error status is read only for an OAI-PMH error in it (some providers
                # send theirs with 400); a busy one only for its Retry-After.
                if status in (429, 503) or (status != 200 and not _is_xml(headers)):
                    return status, headers, None
                size = 0
                for chunk in response.iter_bytes():
                    size += len(chunk)
                    self.bytes += len(chunk)
                    if size > self.limits.max_bytes:
                        raise HarvestError(
                            f"{what}: the response is larger than {self.limits.max_bytes} bytes"
                        )
                    if self.bytes > self.limits.max_total_bytes:
                        raise _Cap(
                            f"the harvest reached oai_max_bytes ({self.limits.max_total_bytes} "
                            "bytes of responses)"
                        )
                    if time.monotonic() > deadline:
                        self.left()
                        raise HarvestError(
                            f"{what}: the response took longer than {self.limits.timeout:g} s"
                        )
                    parser.feed(chunk)
                if size == 0:
                    raise HarvestError(f"{what}: an empty response (HTTP {status})")
                root = parser.close()
        except httpx2.TimeoutException:
            raise HarvestError(
                f"{what}: no answer within {self.limits.timeout:g} s (timed out)"
            ) from None
        except httpx2.HTTPError as exc:
            raise HarvestError(f"{what}: {exc.__class__.__name__}: {exc}") from None
        except netguard.InternalAddress as exc:
            raise HarvestError(f"{what}: redirected to {exc} (allow_internal: no)") from None
        except oaixml.TooManyElements as exc:
            raise HarvestError(f"{what}: {exc}") from None
        except etree.XMLSyntaxError as exc:
            if status != 200:
                return status, headers, None
            raise HarvestError(f"{what}: not well-formed XML: {exc}") from None
        if oaixml.has_dtd_or_entities(root):
            raise HarvestError(f"{what}: a DTD or an entity in the XML (OAI-PMH has none)")
        return status, headers, root


def _digest(text: str) -> bytes:
    return hashlib.blake2b(text.encode(), digest_size=8).digest()


def _is_xml(headers) -> bool:
    return "xml" in headers.get("content-type", "")


def _verb(query: dict[str, str]) -> str:
    return query.get("verb", "?")


@dataclass
class Harvest:
    """One harvest of `url`: iterate it for the `Record`s (once). Afterwards, `response_date`
    is the provider's date of the first ListRecords answer (the `from` of the next
    incremental run), `skipped` has one line per record that could not be an item."""

    url: str
    set_spec: str | None = None
    from_date: str | None = None
    limits: Limits = field(default_factory=Limits)
    sleep: Callable[[float], None] = time.sleep
    granularity: str = SECONDS
    deleted_record: str = "no"
    response_date: str | None = None
    skipped: list[str] = field(default_factory=list)  # the first MAX_SKIPPED_LINES
    skipped_count: int = 0
    count: int = 0  # records yielded
    taken: int = 0  # records read, skipped ones too
    stopped: str | None = None  # the cap that ended the records
    # The import's batch (apply's `batch`): translation_of only names a record of the same
    # batch, the one place the import finds its language.
    batch: int | None = None

    def __iter__(self) -> Iterator[Record]:
        with _Scythe(self.url, self.limits, self.sleep) as scythe:
            try:
                yield from self._records(scythe)
            except _Cap as cap:
                self.stopped = str(cap)
            except oaipmh_scythe.OAIPMHException as exc:
                code = type(exc).__name__
                code = code[0].lower() + code[1:]
                raise HarvestError(f"{self.url}: OAI-PMH error {code}: {exc}") from None

    def skip(self, line: str) -> None:
        self.skipped_count += 1
        if len(self.skipped) < MAX_SKIPPED_LINES:
            self.skipped.append(line)

    def _records(self, scythe: _Scythe) -> Iterator[Record]:
        identify = scythe.harvest({"verb": "Identify"}).xml.find(OAI + "Identify")
        if identify is None:
            raise HarvestError(f"{self.url}: its Identify answer has no Identify element")
        self.granularity = (identify.findtext(OAI + "granularity") or SECONDS).strip()
        self.deleted_record = (identify.findtext(OAI + "deletedRecord") or "no").strip()
        query = {"verb": "ListRecords", "metadataPrefix": "oai_dc"}
        if self.from_date:
            # A provider of day granularity refuses a time of day (badArgument).
            query["from"] = self.from_date[:10] if self.granularity == DAYS else self.from_date
        if self.set_spec:
            query["set"] = self.set_spec
        first = scythe.responses
        try:
            items = OAIItemIterator(scythe, query)
        except oaipmh_scythe.NoRecordsMatch:
            items = iter(())  # nothing changed since `from`: not an error
        if scythe.responses > first:
            self.response_date = scythe.response_date or None
        order = _Order(self.batch)
        for element in items:
            if self.taken >= self.limits.max_records:
                raise _Cap(f"the harvest reached oai_max_records ({self.limits.max_records})")
            self.taken += 1
            record = self.record(element)
            if record is not None:
                self.count += 1
                yield from order.put(record)
        yield from order.rest()

    def record(self, element) -> Record | None:
        header = element.find(OAI + "header")
        identifier = (
            (header.findtext(OAI + "identifier") or "").strip() if header is not None else ""
        )
        if not identifier:
            self.skip(f"{self.url}: a record with no header identifier")
            return None
        where = f"oai record {identifier}"
        if len(identifier) > MAX_IDENTIFIER:
            self.skip(
                f"{where[:100]}...: its identifier is longer than {MAX_IDENTIFIER} characters"
            )
            return None
        if header.get("status") == "deleted":
            return Record(identifier, deleted=True, where=where)
        dc = element.find(f"{OAI}metadata/{OAI_DC}")
        if dc is None:
            self.skip(f"{where}: no oai_dc metadata")
            return None
        values: dict[str, list[str]] = {}
        size = 0
        for child in dc:
            # Only the fifteen elements: the sidecar schema refuses any other (`dc:audience`,
            # `dc:identifier.uri`), and the import would stop at this record on every run.
            tag = child.tag if isinstance(child.tag, str) else ""
            name = tag[len(DC) :] if tag.startswith(DC) else ""
            if name not in sidecar.DC_ELEMENTS:
                continue
            text = "".join(child.itertext()).strip()
            if text:
                values.setdefault(name, []).append(text)
                size += len(text.encode()) + len(child.tag)
        # Its length as text first (no YAML made of megabytes), then as the sidecar's YAML:
        # a value's line breaks and escapes can make that three times longer (32 KiB of
        # "a\n" were a 114 KB sidecar, which the index and every revision then refuse).
        if size > MAX_DC_BYTES or _yaml_size(values) > MAX_DC_BYTES:
            self.skip(f"{where}: its oai_dc is larger than {MAX_DC_BYTES} bytes")
            return None
        location = next((url for url in values.get("identifier", ()) if _location(url)), None)
        if location is None:
            self.skip(f"{where}: no http(s) dc:identifier (its landing page)")
            return None
        language = next((lang for lang in map(_language, values.get("language", ())) if lang), None)
        title = values["title"][0] if "title" in values else None
        dc_tuples = {name: tuple(texts) for name, texts in values.items()}
        # A relation across sets would name a record this harvest never lists.
        related = {} if self.set_spec else relations(identifier, values.get("relation", ()))
        return Record(
            identifier,
            location=location.strip(),
            title=title,
            language=language,
            dc=dc_tuples,
            relations=related,
            where=where,
        )


def relations(identifier: str, values) -> dict[str, list[str]]:
    """The relations dc:relation values name (RELATION_OF) to records of the same provider
    (an OAI identifier `oai:<host>:...` of `identifier`'s host), each relation's targets in
    order; _Order keeps one of each."""
    host = identifier.split(":", 2)[1] if identifier.count(":") >= 2 else None
    found: dict[str, list[str]] = {}
    for value in values:
        name, _, other = value.strip().partition(" ")
        other = other.strip()
        if name in RELATION_OF and host and other.startswith(f"oai:{host}:"):
            if other != identifier:
                found.setdefault(RELATION_OF[name], []).append(other)
    return found


class _Order:
    """Records in the order the import can take their relations: one held back until the
    record its edition_of / metadata_of names is yielded; translation_of kept only when it
    names a record already yielded in the same import batch (both are needed for the
    languages), else the other record names this one. The rest, at the end, name records an
    earlier harvest may have brought."""

    def __init__(self, batch: int | None):
        self.batch = batch
        self.chunk: dict[str, str | None] = {}  # the import batch's ids -> their language
        # The latest MAX_REMEMBERED ids yielded, as digests: a record naming one yielded
        # before them waits to the end, by when that one is applied.
        self.yielded: set[bytes] = set()
        self.remembered: deque[bytes] = deque()
        self.held: dict[str, dict[str, Record]] = {}  # the id waited for -> records by id
        self.waits: dict[str, str] = {}  # a held record's id -> the id it waits for
        self.held_bytes = 0  # of the records held (_held_bytes)

    def put(self, record: Record) -> Iterator[Record]:
        """`record` (its relations' targets in lists, as `relations` gives them) now or later."""
        earlier = self.waits.get(record.source_id)
        if earlier is not None:  # listed again (changed meanwhile): this one is the record now
            self._let_go(self.held[earlier].pop(record.source_id))
        waiting = [
            targets[0]
            for key, targets in record.relations.items()
            if key != TRANSLATION_OF and _digest(targets[0]) not in self.yielded
        ]
        size = _held_bytes(record)
        room = self.held_bytes + size <= MAX_HELD_BYTES
        if waiting and len(self.waits) < MAX_HELD and room:
            self.held.setdefault(waiting[0], {})[record.source_id] = record
            self.waits[record.source_id] = waiting[0]
            self.held_bytes += size
            return
        yield from self._out(record)

    def _out(self, record: Record) -> Iterator[Record]:
        if self.batch is not None and len(self.chunk) >= self.batch:
            self.chunk = {}  # apply's _chunks: a new batch
        mine = {k: v[0] for k, v in record.relations.items() if k != TRANSLATION_OF}
        # Translations are listed by language: both records need one, and two.
        other = next(
            (
                t
                for t in record.relations.get(TRANSLATION_OF, ())
                if self.chunk.get(t) not in (None, record.language)
            ),
            None,
        )
        if other is not None and record.language:
            mine[TRANSLATION_OF] = other
        self.chunk[record.source_id] = record.language
        digest = _digest(record.source_id)
        if digest not in self.yielded:
            self.yielded.add(digest)
            self.remembered.append(digest)
            if len(self.remembered) > MAX_REMEMBERED:
                self.yielded.discard(self.remembered.popleft())
        yield dataclasses.replace(record, relations=mine)
        for waiting in self.held.pop(record.source_id, {}).values():
            self._let_go(waiting)
            yield from self.put(waiting)

    def _let_go(self, record: Record) -> None:
        del self.waits[record.source_id]
        self.held_bytes -= _held_bytes(record)

    def rest(self) -> Iterator[Record]:
        while self.held:
            # From a record not itself held: the ones waiting for a held one follow it (_out).
            target = next((t for t in self.held if t not in self.waits), next(iter(self.held)))
            records = self.held.pop(target)
            for record in records.values():
                self._let_go(record)
                yield from self._out(record)


def _held_bytes(record: Record) -> int:
    """What holding `record` costs: the size of each of its strings (a string's header is
    some 50 bytes, so a provider choosing many short values chooses that, not their
    characters) and the reference to it."""
    strings = [value for values in record.dc.values() for value in values]
    strings += [t for ts in record.relations.values() for t in ts]
    strings += [record.source_id, record.where, record.location or ""]
    return sum(sys.getsizeof(text) + 8 for text in strings)


def _yaml_size(values: Mapping[str, list[str]]) -> int:
    """The bytes of `values` as a sidecar's dc (imports/apply.py: one value is a scalar)."""
    dc = {name: texts[0] if len(texts) == 1 else texts for name, texts in values.items()}
    return len(dump_sidecar({"dc": dc}).encode())


def _location(text: str) -> bool:
    try:
        sidecar.location_url(text)
    except ValueError:
        return False
    return True


def _language(text: str) -> str | None:
    """The item's `language` when dc:language is already lang[-CC]; else none (the dc
    keeps what the provider wrote: ISO 639-2 codes, language names)."""
    try:
        return sidecar.normalize_language(text.strip())
    except ValueError:
        return None


def source_name(url: str) -> str:
    """The source an endpoint's records are mapped under (imports/apply.py): the endpoint
    alone, so that a record harvested through two sets is one item."""
    return "oai-pmh:" + url.strip()


def _harvest_key(url: str, set_spec: str | None) -> str:
    return source_name(url) + (f" set={set_spec}" if set_spec else "")


def _harvests(state_dir: str | Path) -> dict[str, str]:
    try:
        known = json.loads((Path(state_dir) / HARVESTS_FILE).read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        raise HarvestError(f"{Path(state_dir) / HARVESTS_FILE}: unreadable ({exc})") from None
    return known if isinstance(known, dict) else {}


def last_harvest(config: Mapping[str, Any], url: str, set_spec: str | None) -> str | None:
    """The responseDate of the last harvest of `url` (and `set_spec`) that was applied."""
    date = _harvests(config["state_dir"]).get(_harvest_key(url, set_spec))
    return date if isinstance(date, str) else None


def remember_harvest(config: Mapping[str, Any], harvest: Harvest) -> None:
    """Keep `harvest`'s responseDate as the next run's `from` (once its records are applied:
    a run that stopped midway harvests the same again)."""
    if not harvest.response_date:
        return
    known = _harvests(config["state_dir"])
    known[_harvest_key(harvest.url, harvest.set_spec)] = harvest.response_date
    path = Path(config["state_dir"]) / HARVESTS_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    files.replace_file(path, json.dumps(known, indent=1, sort_keys=True) + "\n")
