"""The OAI-PMH 2.0 data provider: the six verbs, every argument rule and error code of the
specification (openarchives.org/OAI/openarchivesprotocol.html, §3 and §4), over the index's
OAI rows (index/oai.py) and the catalog's items. No web framework: `Provider.answer` takes
the request's arguments and gives the XML document.

Identifiers are `oai:<archive host>:<ibi>` (the IBI's repository name when it has one, else
its IBIp). Datestamps are UTC seconds. Sets: `contenttype:<Data|Metadata>`,
`repository:<subdomain>` and `repository:<subdomain>:<word>` (repository names are
`subdomain/word/...`: a collection laid out by repository name is harvested per institution
or per series). docs/oai-pmh.md says why.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from xml.sax.saxutils import escape, quoteattr

from ..collection.sidecar import xml_text
from ..common.net import persistent_url
from ..index import oai as rows
from ..index.records import decode
from ..index.walk import directory_of
from ..protocol.answers import Links
from ..protocol.catalog import Item
from . import records
from .tokens import BadToken, Tokens

OAI = "http://www.openarchives.org/OAI/2.0/"
OAI_XSD = "http://www.openarchives.org/OAI/2.0/OAI-PMH.xsd"
XSI = records.XSI
GRANULARITY = "YYYY-MM-DDThh:mm:ssZ"
PREFIX = "oai_dc"
PAGE = {"ListRecords": 100, "ListIdentifiers": 500}
# A ListRecords page ends once its records hold this many characters, whatever their number:
# a record carries its Metadata item's oai_dc file (up to records.MAX_RECORD_FILE, 1 MiB),
# and 100 of them made a 99 MB answer, 2.7 s and 350 MB of a worker for one request (issue
# 30, seventh adversarial pass). Ordinary records (a few KB) fill 100 long before this.
PAGE_BYTES = 4 * 1024 * 1024
SETS_PAGE = 500  # sets in a ListSets page
_LISTS = frozenset({"from", "until", "set", "metadataPrefix"})
# verb: (required, optional); a resumptionToken is exclusive where the verb allows one
VERBS: dict[str, tuple[frozenset, frozenset]] = {
    "Identify": (frozenset(), frozenset()),
    "ListMetadataFormats": (frozenset(), frozenset({"identifier"})),
    "ListSets": (frozenset(), frozenset()),
    "GetRecord": (frozenset({"identifier", "metadataPrefix"}), frozenset()),
    "ListIdentifiers": (frozenset({"metadataPrefix"}), frozenset({"from", "until", "set"})),
    "ListRecords": (frozenset({"metadataPrefix"}), frozenset({"from", "until", "set"})),
}
TOKEN_VERBS = frozenset({"ListSets", "ListIdentifiers", "ListRecords"})
_SPEC_PART = re.compile(r"[A-Za-z0-9\-_.!~*'()]+\Z")  # a setSpec's segment (OAI-PMH.xsd)
_DAY = re.compile(r"\d{4}-\d{2}-\d{2}\Z")
_SECOND = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z\Z")
SET_KINDS = {"contenttype": "ct", "repository": "sub"}


class OaiError(Exception):
    """One of the protocol's error codes, with a message for people."""

    def __init__(self, code: str, message: str):
        super().__init__(message)
        self.code = code


@dataclass(frozen=True)
class Repository:
    """What Identify says: the name, the host of identifiers, the administrator."""

    name: str
    host: str
    admin_email: str


def stamp(seconds: int) -> str:
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_date(text: str, *, end: bool) -> tuple[int, str]:
    """A `from`/`until` argument: its UTC seconds (a day's last second for an `until` day)
    and its granularity; badArgument for anything else."""
    try:
        if _SECOND.match(text):
            return int(
                datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC).timestamp()
            ), "s"
        if _DAY.match(text):
            day = int(datetime.strptime(text, "%Y-%m-%d").replace(tzinfo=UTC).timestamp())
            return day + (86399 if end else 0), "d"
    except (ValueError, OverflowError):
        pass
    raise OaiError("badArgument", f"{text!r} is not a date YYYY-MM-DD or YYYY-MM-DDThh:mm:ssZ")


def set_specs(header: rows.Header) -> list[str]:
    """The sets a record is in, by its contenttype and its repository name."""
    ct, sub, rep = header.sets
    specs = []
    if ct and _SPEC_PART.match(ct):
        specs.append(f"contenttype:{ct}")
    if sub and _SPEC_PART.match(sub):
        specs.append(f"repository:{sub}")
        word = rep.partition("/")[2] if rep else ""
        if word and _SPEC_PART.match(word):
            specs.append(f"repository:{sub}:{word}")
    return specs


def set_selection(spec: str) -> tuple[str, str] | None:
    """The index's (column, value) of a setSpec, or None for one that is none of ours."""
    parts = spec.split(":")
    if len(parts) == 2 and parts[0] in SET_KINDS:
        return SET_KINDS[parts[0]], parts[1]
    if len(parts) == 3 and parts[0] == "repository":
        return "rep", f"{parts[1]}/{parts[2]}"
    return None


def check_forms(given: dict[str, str]) -> None:
    """badArgument for an argument not of its form (a date, a setSpec, a metadataPrefix),
    before any other error: an answer's request element echoes the arguments, so they must
    be of the schema's types whatever other error the request has (§3.6)."""
    if "metadataPrefix" in given and not _SPEC_PART.match(given["metadataPrefix"]):
        raise OaiError("badArgument", f"{given['metadataPrefix']!r} is not a metadataPrefix")
    grains = {
        parse_date(given[key], end=key == "until")[1] for key in ("from", "until") if key in given
    }
    if len(grains) > 1:
        raise OaiError("badArgument", "from and until must have the same granularity")
    if "set" in given and not all(_SPEC_PART.match(part) for part in given["set"].split(":")):
        raise OaiError("badArgument", f"{given['set']!r} is not a setSpec")


def check_arguments(args: list[tuple[str, str]]) -> tuple[str, dict[str, str]]:
    """The verb and its arguments, by the rules of §3.1.1 and §4: badVerb, badArgument."""
    verbs = [v for k, v in args if k == "verb"]
    if len(verbs) != 1 or verbs[0] not in VERBS:
        raise OaiError("badVerb", "the verb is missing, repeated or not an OAI-PMH verb")
    verb = verbs[0]
    given: dict[str, str] = {}
    for key, value in args:
        if key == "verb":
            continue
        if key in given:
            raise OaiError("badArgument", f"the argument {key} is repeated")
        given[key] = value
    required, optional = VERBS[verb]
    if "resumptionToken" in given and verb in TOKEN_VERBS:
        if len(given) > 1:
            raise OaiError("badArgument", "resumptionToken is an exclusive argument")
        return verb, given
    unknown = sorted(set(given) - required - optional)
    if unknown:
        raise OaiError("badArgument", f"{verb} takes no argument {unknown[0]}")
    missing = sorted(required - set(given))
    if missing:
        raise OaiError("badArgument", f"{verb} needs the argument {missing[0]}")
    return verb, given


class Provider:
    """Answers OAI-PMH requests for one Archive from its catalog (index.catalog.StoreCatalog:
    `read` runs index/oai.py's queries on the request's snapshot, `lookup` finds an item)."""

    def __init__(
        self,
        catalog: Any,
        tokens: Tokens,
        repository: Repository,
        resolver: str,
        resolve_file: Callable[[str | os.PathLike, str, str], Path | None],
    ):
        self.catalog = catalog
        self.tokens = tokens
        self.repository = repository
        self.resolver = resolver
        self.resolve_file = resolve_file
        self.prefix = f"oai:{repository.host}:"

    def answer(self, args: list[tuple[str, str]], site: Links, base_url: str) -> bytes:
        """The response document to a request with `args` (query or form, in order)."""
        now = stamp(rows.now())
        try:
            verb, given = check_arguments(args)
        except OaiError as exc:
            return _document(now, base_url, {}, _error(exc))
        try:
            check_forms(given)
            body = getattr(self, "_" + verb)(given, site, base_url)
        except OaiError as exc:
            body = _error(exc)
            if exc.code == "badArgument":  # §3.6: then the request element has no attributes
                return _document(now, base_url, {}, body)
        return _document(now, base_url, {"verb": verb, **given}, body)

    # -- the verbs -------------------------------------------------------------------

    def _Identify(self, given: dict, site: Links, base_url: str) -> str:
        earliest = self.catalog.read(rows.earliest)
        repo = self.repository
        return (
            f"<Identify><repositoryName>{escape(repo.name)}</repositoryName>"
            f"<baseURL>{escape(base_url)}</baseURL><protocolVersion>2.0</protocolVersion>"
            f"<adminEmail>{escape(repo.admin_email)}</adminEmail>"
            f"<earliestDatestamp>{stamp(earliest or 0)}</earliestDatestamp>"
            "<deletedRecord>persistent</deletedRecord>"
            f"<granularity>{GRANULARITY}</granularity></Identify>"
        )

    def _ListMetadataFormats(self, given: dict, site: Links, base_url: str) -> str:
        if "identifier" in given:
            self._header(given["identifier"])
        return (
            "<ListMetadataFormats><metadataFormat>"
            f"<metadataPrefix>{PREFIX}</metadataPrefix><schema>{records.OAI_DC_XSD}</schema>"
            f"<metadataNamespace>{records.OAI_DC}</metadataNamespace>"
            "</metadataFormat></ListMetadataFormats>"
        )

    def _ListSets(self, given: dict, site: Links, base_url: str) -> str:
        # Pages of SETS_PAGE sets, in the index's order (contenttypes, subdomains, then
        # subdomain/word pairs), a token resuming after the last: in one response, 50,000
        # repository names took 0.94 s and 84 MB of a worker for a 12.5 MB answer (issue 30,
        # tenth adversarial pass).
        state = self._token("ListSets", given) if "resumptionToken" in given else {"o": 0}
        column, after = state.get("c", 0), state.get("v", "")

        def sets(conn) -> tuple[list[tuple[int, str, str, str]], bool]:
            found = []
            for n in range(column, len(rows.SET_COLUMNS)):
                for value in rows.set_values(
                    conn, rows.SET_COLUMNS[n], after if n == column else ""
                ):
                    spec, name = _set_of(n, value)
                    if all(_SPEC_PART.match(part) for part in spec.split(":")):
                        if len(found) == SETS_PAGE:
                            return found, True
                        found.append((n, value, spec, name))
            return found, False

        found, more = self.catalog.read(sets)
        listed = "".join(
            f"<set><setSpec>{spec}</setSpec><setName>{escape(name)}</setName></set>"
            for _, _, spec, name in found
        )
        cursor, token = state["o"], ""
        if more:
            last = found[-1]
            nxt = {"verb": "ListSets", "c": last[0], "v": last[1], "o": cursor + len(found)}
            following = escape(self.tokens.issue(nxt))
            token = f'<resumptionToken cursor="{cursor}">{following}</resumptionToken>'
        elif cursor:
            size = cursor + len(found)
            token = f'<resumptionToken completeListSize="{size}" cursor="{cursor}"/>'
        return "<ListSets>" + listed + token + "</ListSets>"

    def _GetRecord(self, given: dict, site: Links, base_url: str) -> str:
        header = self._header(given["identifier"])
        _check_prefix(given["metadataPrefix"])
        return f"<GetRecord>{self._record(header, site)}</GetRecord>"

    def _ListIdentifiers(self, given: dict, site: Links, base_url: str) -> str:
        return self._list("ListIdentifiers", given, site)

    def _ListRecords(self, given: dict, site: Links, base_url: str) -> str:
        return self._list("ListRecords", given, site)

    # -- lists -----------------------------------------------------------------------

    def _list(self, verb: str, given: dict, site: Links) -> str:
        state = self._state(verb, given)
        sel = rows.Selection(state["c"], state["v"], state["f"], state["u"])
        size = PAGE[verb]

        def read(conn) -> tuple[list, int | None]:
            position = (state["t"], state["k"])
            found = rows.page(conn, sel, position, size + 1, records=verb == "ListRecords")
            total = state["n"] if "n" in state else rows.count(conn, sel)
            return found, total

        found, total = self.catalog.read(read)
        if not found and state["o"] == 0:
            raise OaiError("noRecordsMatch", "no record matches the arguments")
        more, found = len(found) > size, found[:size]
        if verb == "ListIdentifiers":
            listed = "".join(self._header_xml(h) for h in found)
        else:
            made = self._records(found, site)
            more, found = more or len(made) < len(found), found[: len(made)]
            listed = "".join(made)
        if not more:  # the last page: the list's size is known
            total = state["o"] + len(found)
        elif total is not None:
            # Never less than what is listed (an index from before the counts; positiveInteger).
            total = max(total, state["o"] + len(found) + more)
        cursor = state["o"]
        token = ""
        if more or cursor:
            following = ""
            if more:
                last = found[-1]
                nxt = {
                    **state,
                    "t": last.stamp,
                    "k": last.key,
                    "o": cursor + len(found),
                    "n": total,
                }
                following = escape(self.tokens.issue(nxt))
            size_given = "" if total is None else f' completeListSize="{total}"'
            token = f'<resumptionToken{size_given} cursor="{cursor}">{following}</resumptionToken>'
        return f"<{verb}>{listed}{token}</{verb}>"

    def _records(self, headers: list, site: Links) -> list[str]:
        """The records of `headers`, in order, until they hold PAGE_BYTES (one at least)."""
        made: list[str] = []
        held = 0
        for header in headers:
            if held >= PAGE_BYTES:
                break
            made.append(self._record(header, site))
            held += len(made[-1])
        return made

    def _state(self, verb: str, given: dict) -> dict:
        """Where a list request starts: from its arguments, or from its resumption token."""
        if "resumptionToken" in given:
            return self._token(verb, given)
        _check_prefix(given["metadataPrefix"])
        since, until = 0, rows.FOREVER
        if "from" in given:
            since = parse_date(given["from"], end=False)[0]
        if "until" in given:
            until = parse_date(given["until"], end=True)[0]
        column = value = None
        if "set" in given:
            chosen = set_selection(given["set"])
            if chosen is None:
                raise OaiError("noRecordsMatch", f"there is no set {given['set']!r}")
            column, value = chosen
        return {
            "verb": verb,
            "c": column,
            "v": value,
            "f": since,
            "u": until,
            "t": -1,
            "k": "",
            "o": 0,
        }

    def _token(self, verb: str, given: dict) -> dict:
        """The state the request's resumption token carries, if this Archive issued it for
        `verb`; badResumptionToken otherwise."""
        try:
            state = self.tokens.read(given["resumptionToken"])
        except BadToken as exc:
            raise OaiError("badResumptionToken", str(exc)) from None
        if state.get("verb") != verb:
            raise OaiError("badResumptionToken", f"the resumptionToken is not of {verb}")
        return state

    # -- records ---------------------------------------------------------------------

    def _header(self, identifier: str) -> rows.Header:
        ibi = identifier[len(self.prefix) :] if identifier.startswith(self.prefix) else ""
        header = self.catalog.read(lambda conn: rows.header(conn, ibi)) if ibi else None
        if header is None:
            raise OaiError("idDoesNotExist", f"no item has the identifier {identifier!r}")
        return header

    def _header_xml(self, header: rows.Header) -> str:
        status = ' status="deleted"' if header.deleted else ""
        specs = "".join(f"<setSpec>{s}</setSpec>" for s in set_specs(header))
        return (
            f"<header{status}><identifier>{escape(self.prefix + header.ibi)}</identifier>"
            f"<datestamp>{stamp(header.stamp)}</datestamp>{specs}</header>"
        )

    def _record(self, header: rows.Header, site: Links) -> str:
        item = None
        if not header.deleted and header.directory is not None:
            # The record of the directory that last wrote this IBI's row (read with the page);
            # GetRecord reads it alone.
            text = header.record
            if text is None:
                item = self.catalog.item_at(directory_of(header.directory))
            else:
                item = decode(directory_of(header.directory), text)
        if item is None or item.state == "Deleted":
            return f"<record>{self._header_xml(header._replace(deleted=True))}</record>"
        metadata = self._oai_dc(item, header.ibi, site)
        return f"<record>{self._header_xml(header)}<metadata>{metadata}</metadata></record>"

    def _oai_dc(self, item: Item, ibi: str, site: Links) -> str:
        dc = records.record_dc(item, self.catalog.lookup, self.resolve_file, self.catalog.root)
        related = records.relation_values(
            item, self.catalog.lookup, self.identifier, self.catalog.naming
        )
        if related:
            dc = {**dc, "relation": [*dc.get("relation", ()), *related]}
        if item.language and not dc.get("language"):
            # The sidecar's own language (a translation is listed by it), when dc names none.
            dc = {**dc, "language": [item.language]}
        urls = [records.landing_page(site, ibi), persistent_url(self.resolver, ibi)]
        return records.oai_dc_text(dc, [u for u in urls if u])

    def identifier(self, item: Item) -> str:
        """An item's OAI identifier (index/oai.py's rule for the IBI it carries)."""
        forms = {"rep": item.forms.rep, "ibip": item.forms.ibip, "name": item.name.text}
        return self.prefix + rows.identifier_ibi(forms)


def _set_of(column: int, value: str) -> tuple[str, str]:
    """The setSpec and setName of `value` of the index's set column number `column`."""
    kind = rows.SET_COLUMNS[column]
    if kind == "ct":
        return f"contenttype:{value}", f"Items of contenttype {value}"
    if kind == "sub":
        return f"repository:{value}", f"Repository names under {value}"
    sub, _, word = value.partition("/")
    return f"repository:{sub}:{word}", f"Repository names under {value}"


def _check_prefix(prefix: str) -> None:
    # Its form was checked first, by check_forms.
    if prefix != PREFIX:
        raise OaiError("cannotDisseminateFormat", f"the one metadataPrefix is {PREFIX}")


def _error(exc: OaiError) -> str:
    return f"<error code={quoteattr(exc.code)}>{escape(xml_text(str(exc)))}</error>"


def _document(now: str, base_url: str, request: dict[str, str], body: str) -> bytes:
    # On badVerb and badArgument the request element carries no attributes (§3.6).
    attrs = "".join(f" {k}={quoteattr(xml_text(v))}" for k, v in request.items())
    return (
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        f'<OAI-PMH xmlns="{OAI}" xmlns:xsi="{XSI}" xsi:schemaLocation="{OAI} {OAI_XSD}">'
        f"<responseDate>{now}</responseDate><request{attrs}>{escape(base_url)}</request>"
        f"{body}</OAI-PMH>\n"
    ).encode()
