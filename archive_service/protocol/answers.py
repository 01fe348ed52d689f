"""The Archive service's answers (§7): MontarResposta, MontarListaDeURL, FiltrarListaDeURL.

Plain protocol logic: no web framework here. The web layer hands in the decoded query and a
`Links` object that knows where the item files and pages are published.
"""

from __future__ import annotations

import ipaddress
import os
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import lru_cache
from typing import NamedTuple

from . import ibi as ibimod
from . import pairs as pairsmod
from .catalog import DOC, Catalog, Item, follow_editions
from .errors import RequestError
from .ibi import Forms, Ibi
from .links import Links
from .networks import Networks
from .requests import (
    UrlRequest,
    check_acknowledgment,
    filepath_parts,
    parse_client,
    parse_url_request,
)
from .urlkeys import UrlKeys, canonical_url
from .verbs import (
    ALL,
    LAST_EDITION,
    METADATA,
    TRANSLATION,
    Relation,
    Step,
    UnknownStep,
    Verbs,
    qualifier_pattern,
)

ID_PAIRS = ("archiveaddress", "ibi", "ibi.archiveservice", "ibi.platformsoftware")
RELATED_PREFIXES = ("contenttype", "ibi", "state", "timestamp", "url")


def default_relations(catalog: Catalog) -> list[Relation]:
    """This Archive's relation subset (§7.2): only languages it holds or its sidecars declare.

    The shape follows the seed's own Archive (Example 7.2): the item, its last edition, its
    metadata (free and oai_dc) also of the last edition, its translations, and the
    translations of its metadata.
    """
    u, m, m_dc = Step(LAST_EDITION), Step(METADATA), Step(METADATA, "oai_dc")
    translations = [Step(TRANSLATION, lang) for lang in sorted(catalog.languages)]
    if catalog.has_unlanguaged:
        translations.insert(0, Step(TRANSLATION))
    relations: list[Relation] = [(), (u,), (m,), (m_dc,), (u, m), (u, m_dc)]
    relations += [(t,) for t in translations]
    relations += [(m, t) for t in translations]
    return relations


_process_keys: UrlKeys | None = None


def process_urlkeys() -> UrlKeys:
    """Keys with a secret of this process only (and its forks): for tools and tests."""
    global _process_keys
    if _process_keys is None:
        _process_keys = UrlKeys.ephemeral()
    return _process_keys


def new_urlkey(urls: Iterable[str] = (), keys: UrlKeys | None = None) -> str:
    """A fresh key for one answer vouching for its `urls` (urlkeys.py: Table 5.1 shape,
    `digits-digits`, checkable later); without `keys`, a secret of this process only."""
    return (keys or process_urlkeys()).issue(urls)


# ---------------------------------------------------------------------- the answer itself


@dataclass(frozen=True)
class Node:
    """What a relation leads to: an item held here, an IBI held elsewhere, or inline metadata."""

    item: Item | None = None
    ref: Ibi | None = None
    inline_of: Item | None = None
    fmt: str | None = None


_PLACE = "\x00"  # where the urlkey goes in a rendered answer (never in a rendered value)


class Rendered(NamedTuple):
    """An answer to urlRequest rendered once, waiting for the fresh urlkey of each use.

    `checks` are the disk's answers the pairs depend on, ("in-doc", root, directory,
    relpath, found); an answer is reused only while they still
    hold (Archive.CHECK_EVERY), so a file that vanished since gets no URL. Only strings,
    bytes and booleans: a worker's cache of these is nothing the garbage collector has to
    walk through."""

    head: str
    tail: str | None  # None: the answer has no url pair, so no urlkey
    urls: tuple[bytes, ...]  # canonical forms of the URLs the key vouches for
    checks: tuple[tuple, ...]

    @classmethod
    def of(cls, answer: list[tuple[str, str]], checks=()) -> Rendered:
        urls = tuple(sorted({canonical_url(v) for n, v in answer if _is_url_pair(n)}))
        if not urls:
            return cls(pairsmod.render(answer), None, urls, tuple(checks))
        head, tail = pairsmod.render(answer + [("urlkey", _PLACE)]).split(_PLACE)
        return cls(head, tail, urls, tuple(checks))

    def holds(self, disk_checks: dict[str, Callable[..., bool]]) -> bool:
        return all(disk_checks[check[0]](*check[1:-1]) == check[-1] for check in self.checks)

    def body(self, keys: UrlKeys) -> str:
        if self.tail is None:
            return self.head
        return self.head + keys.issue_canonical(self.urls) + self.tail


_BY_CLIENT = "by client"  # in the answer cache: this answer depends on the client's address
_ITEM_OF_URL = object()  # in the answer cache: a key's first element, never a request's
_UNKNOWN = object()


class Archive:
    """One Archive's identity, collection and publishing place: everything an answer needs."""

    def __init__(
        self,
        catalog: Catalog,
        archiveaddress: str,
        archiveserviceibi: str,
        platformsoftware: str | None = None,
        urlkeys: UrlKeys | None = None,
        *,
        resolve_file: Callable[[str, str, str], object | None],
        current: Callable[[], bool] = lambda: False,
    ):
        """`resolve_file(root, directory, relpath)`: the file /col/ serves for `relpath` of
        the item at `directory`, or None (collection.items.resolve_file): an answer gives a
        URL only for such a file. `current()`: whether the catalog holds every change made to
        the disk until less than CHECK_EVERY ago (indexer/vouch.py)."""
        self.catalog = catalog
        self._current = current
        # What an answer's URLs depend on, by the name its checks record (Rendered.checks).
        self._disk_checks = {
            "in-doc": lambda root, directory, relpath: (
                resolve_file(root, directory, relpath) is not None
            ),
        }
        self.urlkeys = urlkeys  # None: keys only this process can check (new_urlkey)
        self.archiveaddress = archiveaddress
        self.service = Forms.of(ibimod.parse(archiveserviceibi))
        self.platform = Forms.of(ibimod.parse(platformsoftware)) if platformsoftware else None
        self.service_item = service_item(ibimod.parse(archiveserviceibi), self.service)
        self._service_keys = frozenset(self.service_item.keys())
        self._trace = threading.local()  # what an answer being built read from disk and client
        # The threads of a worker share the kept answers: one at a time evicts and adds
        # (two evicting at once would both pick the same oldest key).
        self._keeping = threading.Lock()

    # Rendered answers kept per worker, whatever its threads (1-3 KB each), while the index
    # does not change.
    ANSWERS = 4096

    # A kept answer's files are stat'ed again when it was last checked this many seconds ago
    # or more, unless `current()` says the index (whose every change drops the kept answers)
    # holds the disk as it is. A URL is a promise about the disk for as long as the client
    # takes to follow it anyway; a second is also what a changed sidecar takes to show.
    CHECK_EVERY = 1.0

    @property
    def relations(self) -> list[Relation]:
        # Computed when asked: the languages held change as the collection does.
        return default_relations(self.catalog)

    def lookup(self, ibi: str | Ibi) -> Item | None:
        """The item held here under `ibi`. A directory of the collection is found by the
        catalog (whose claim rule decides between directories); failing one, the Archive's
        own service is an identified item all the same: "Cada Arquivo deve ter seu próprio
        serviço de Arquivo e torná-lo um item identificado tido como original
        intransferível" (§7.1, §5.1)."""
        item = self.catalog.lookup(ibi)
        if item is None and ibimod.key(str(ibi)) in self._service_keys:
            return self.service_item
        return item

    # -- relation steps ----------------------------------------------------------------

    def last_edition(self, item: Item) -> Item | None:
        """Follow nextedition through the items held here; None once the chain leaves."""
        chain = follow_editions(self.lookup, item)
        return chain.last if chain.ends_here else None

    def _held_or_ref(self, ref: Ibi, fmt: str | None = None) -> Node:
        held = self.lookup(ref)
        return Node(item=held, fmt=fmt) if held else Node(ref=ref)

    def translations(self, node: Node) -> dict[str | None, Node]:
        """The translation group of a node, by language (None: no declared language)."""
        if node.inline_of is not None:
            return {None: node}
        item = node.item
        if item is None:
            return {}
        group = {lang: self._held_or_ref(ref, node.fmt) for lang, ref in item.translations.items()}
        group[item.language] = node
        return group

    def step(self, node: Node, step: Step) -> list[tuple[str, Node]]:
        """Where one step of a relation leads from `node`, by qualifier: each verb's step
        is followed by its own method (FOLLOW); a step without one is an error."""
        follow = self.FOLLOW.get(step.kind)
        if follow is None:
            raise UnknownStep(f"the Archive follows no step {step.kind!r} ({step.verb.name})")
        return follow(self, node, step)

    def _to_last_edition(self, node: Node, step: Step) -> list[tuple[str, Node]]:
        if node.inline_of is not None:
            return [(step.qualifier(), node)]
        last = self.last_edition(node.item) if node.item else None
        return [(step.qualifier(), Node(item=last, fmt=node.fmt))] if last else []

    def _to_translations(self, node: Node, step: Step) -> list[tuple[str, Node]]:
        group = self.translations(node)
        if step.arg == ALL:
            return [
                (step.qualifier(lang), n)
                for lang, n in sorted(group.items(), key=lambda kv: kv[0] or "")
            ]
        found = group.get(step.arg)
        return [(step.qualifier(), found)] if found else []

    def _to_metadata(self, node: Node, step: Step) -> list[tuple[str, Node]]:
        item = node.item
        if item is None:
            return []
        if item.metadata is not None:
            return [(step.qualifier(), self._held_or_ref(item.metadata, step.arg))]
        if item.dc:
            return [(step.qualifier(), Node(inline_of=item, fmt=step.arg))]
        return []

    # How each step of verbs.VERBS is followed, by its letter; a new verb's step goes here.
    FOLLOW = {"u": _to_last_edition, "t": _to_translations, "m": _to_metadata}

    def follow(self, item: Item, relation: Relation) -> list[tuple[str, Node]]:
        reached = [("", Node(item=item))]
        for step in relation:
            reached = [(q + q2, n2) for q, n in reached for q2, n2 in self.step(n, step)]
        return reached

    # -- pairs -------------------------------------------------------------------------

    def url_of(self, node: Node, request: UrlRequest, links: Links) -> tuple[str, Item, str] | None:
        """CriarParURL: (url, item it describes, contenttype) or None when unknown here.

        With a verb list given (one verb or more), "deve prevalecer a segunda" (seed 000 §7):
        the URL is the file-list page when GetFileList is among the verbs, otherwise the
        related item's own URL; the file path counts only when no verb is given."""
        filepath = request.filepath if request.verbs.empty else None
        if node.inline_of is not None:
            if request.verbs.filelist or filepath:
                return None
            return links.metadata(node.inline_of, node.fmt), node.inline_of, "Metadata"
        item = node.item
        if item is None or item.state == "Deleted":
            return None
        if item.networks and not self._client_allowed(item, request):
            # A licensed item: outside its networks the user gets its metadata instead.
            meta = self.step(Node(item=item), Step(METADATA))
            return self.url_of(meta[0][1], request, links) if meta else None
        if item is self.service_item:
            # Neither files nor a file list of its own: its URL is the page that says what
            # the service is.
            if request.verbs.filelist or filepath:
                return None
            return links.about, item, item.contenttype
        if request.verbs.filelist:
            return links.filelist(item), item, item.contenttype
        if filepath:
            relpath = "/".join(filepath_parts(filepath))
            if not self.file_exists(item, relpath):
                return None
            return links.file(item, relpath), item, item.contenttype
        if node.fmt:
            relpath = item.formats.get(node.fmt)
            if relpath is None or not self.file_exists(item, relpath):
                return None
            return links.file(item, relpath), item, item.contenttype
        if item.location is not None:
            # Its content lives elsewhere (issue 21): CriarParURL ⟨r,i⟩ lets the Archive
            # choose the access URL, and this one is the existing repository's.
            return item.location, item, item.contenttype
        if item.target is None:
            # No single file opens it: its landing page, which lists the files (issue 32).
            return links.landing(item), item, item.contenttype
        # The index may be older than the disk: never hand out a URL that would 404.
        if not self.file_exists(item, item.target):
            return None
        return links.file(item, item.target), item, item.contenttype

    def item_of_url(
        self, url: str, links: Links, claimed: str | None = None
    ) -> tuple[Item, str] | None:
        """The item held here that a URL this Archive hands out names (the service's own
        item for its page), with the contenttype its answer gave that URL (Metadata for the
        service's metadata pages), or None.

        Read from the URL's canonical form (urlkeys.canonical_url), the one its key is
        checked against: every spelling that verifies (`/col/%73id.inpe.br/…`) names the
        same item. The statistics count by this, never by what an acknowledgment claims:
        a URL elsewhere (an item's `location`) names the `claimed` item, or one of its
        translations, editions or metadata, only if that item's location is this URL."""
        cache = self.catalog.answer_cache()
        if cache is None:
            return self._item_of_url(url, links, claimed)
        # Kept with the answers while the index stays: a resolver acknowledges the same few
        # URLs over and over, and reading one was a quarter of an acknowledgment (issue 35).
        key = (_ITEM_OF_URL, url, claimed, links.about, links.files, links.service)
        found = cache.get(key, _UNKNOWN)
        if found is _UNKNOWN:
            found = self._item_of_url(url, links, claimed)
            self._keep(self.catalog.answer_cache(), key, found)
        return found

    def _item_of_url(self, url: str, links: Links, claimed: str | None) -> tuple[Item, str] | None:
        canon = canonical_url(url)
        located = self._located(canon, claimed) if claimed else None
        if located is not None:
            return located, located.contenttype
        if canon == canonical_url(links.about):
            return self.service_item, self.service_item.contenttype
        for prefix, kind in (
            (links.files, "file"),
            (links.service + "/filelist", "filelist"),
            (links.service + "/metadata", "metadata"),
            (links.service + "/item", "landing"),
        ):
            base = canonical_url(prefix) + b"/"
            if not canon.startswith(base):
                continue
            rest = canon[len(base) :]
            if kind == "metadata":
                rest = rest.partition(b"?")[0]  # ?format=oai_dc
            segments = rest.split(b"/")
            for size in (4, 2):  # a repository name or an IBIp, then doc/ for a file
                if kind == "file":
                    fits = len(segments) > size + 1 and segments[size] == DOC.encode()
                else:
                    fits = len(segments) == size
                if fits:
                    item = self.catalog.item_at(
                        b"/".join(segments[:size]).decode("ascii", "replace")
                    )
                    if item is not None and item.state != "Deleted":  # a tombstone serves nothing
                        return item, "Metadata" if kind == "metadata" else item.contenttype
        return None

    def _located(self, canon: bytes, claimed: str) -> Item | None:
        """The item, among `claimed` and those it relates to, whose location is `canon`."""
        if not ibimod.is_valid(claimed):
            return None
        item = self.catalog.lookup(claimed)
        if item is None:
            return None
        related = [item, self.last_edition(item)]
        related += [self.catalog.lookup(ref) for ref in item.translations.values()]
        related += [self.catalog.lookup(item.metadata)] if item.metadata else []
        for other in related:
            if (
                other is not None
                and other.location is not None
                and other.state != "Deleted"
                and canonical_url(other.location) == canon
            ):
                return other
        return None

    def file_exists(self, item: Item, relpath: str) -> bool:
        """Whether /col/ serves this file now (`resolve_file`): the index may be older
        than the disk, and with url_base another server serves the URL without asking."""
        return self._traced("in-doc", str(self.catalog.root), item.directory, relpath)

    def _traced(self, kind: str, *arguments: str) -> bool:
        result = self._disk_checks[kind](*arguments)
        checks = getattr(self._trace, "checks", None)
        if checks is not None:
            checks.append((kind, *arguments, result))
        return result

    def _client_allowed(self, item: Item, request: UrlRequest) -> bool:
        self._trace.by_client = True
        return client_allowed(item, request.client_ips[0] if request.client_ips else None)

    def forms_for(self, qualifier: str, node: Node) -> Forms:
        """`ibi` and `ibi.lastedition` carry every known form (Examples 7.2, 7.6); other
        related items are named by the form they are filed under, or as their reference was
        written when they are held elsewhere (Examples 7.2, 7.8, 8.2)."""
        if node.item is None:
            return Forms.of(node.ref)
        if qualifier in ("", LAST_EDITION.qualifier):
            return node.item.forms
        return node.item.primary

    def related_pairs(
        self, qualifier: str, node: Node, request: UrlRequest, links: Links
    ) -> list[tuple[str, str]]:
        out = []
        if node.inline_of is None:
            out.append(("ibi" + qualifier, self.forms_for(qualifier, node).render()))
        found = self.url_of(node, request, links)
        if found:
            url, item, contenttype = found
            out += [
                ("url" + qualifier, url),
                ("contenttype" + qualifier, contenttype),
                ("state" + qualifier, item.state),
                ("timestamp" + qualifier, iso(item)),
            ]
        return out

    def montar_lista_de_url(
        self,
        request: UrlRequest,
        links: Links,
        relations: Iterable[Relation] | None = None,
        urlkey: bool = True,
    ) -> list[tuple[str, str]]:
        """Algorithm 2 over `relations` (default: this Archive's whole relation subset);
        `urlkey=False` leaves the key to the caller (who filters first)."""
        item = self.lookup(request.ibi)
        if item is None:
            return []
        answer = [
            ("archiveaddress", self.archiveaddress),
            ("ibi.archiveservice", self.service.render()),
            ("ibi.platformsoftware", self.platform.render() if self.platform else "{}"),
        ]
        if item.state == "Deleted":
            return answer + [
                ("ibi", item.forms.render()),
                ("state", "Deleted"),
                ("timestamp", iso(item)),
            ]
        if item.nextedition is not None:
            answer.append(
                (
                    "ibi.nextedition",
                    self.forms_for(".nextedition", self._held_or_ref(item.nextedition)).render(),
                )
            )
        seen = set()
        for relation in self.relations if relations is None else relations:
            for qualifier, node in self.follow(item, relation):
                if qualifier in seen:
                    continue
                seen.add(qualifier)
                answer += self.related_pairs(qualifier, node, request, links)
        return self.with_urlkey(answer) if urlkey else answer

    def with_urlkey(self, answer: list[tuple[str, str]]) -> list[tuple[str, str]]:
        """The answer with a fresh `urlkey` vouching for exactly its url pairs (urlkeys.py);
        computed last, once the URLs are known."""
        urls = [value for name, value in answer if _is_url_pair(name)]
        return [p for p in answer if p[0] != "urlkey"] + [
            ("urlkey", new_urlkey(urls, self.urlkeys))
        ]

    def answer_url_request(self, request: UrlRequest, links: Links) -> list[tuple[str, str]]:
        """MontarListaDeURL then FiltrarListaDeURL, with the answer's urlkey."""
        answer = self._filtered(request, links)
        # Keyed after the filter: the key vouches for the URLs kept, none it dropped.
        return self.with_urlkey(answer) if any(_is_url_pair(n) for n, _ in answer) else answer

    def url_request_body(self, query: dict[str, str], links: Links) -> str:
        """The rendered answer to a urlRequest (its decoded `query`). While the index does
        not change, the answer to the same IBI, verbs and file path (and client address,
        where a licensed item makes it matter) is rendered once per worker and reused with
        a fresh urlkey; RequestError if the request is malformed."""
        cache = self.catalog.answer_cache()
        if cache is None:
            return pairsmod.render(self.answer_url_request(parse_url_request(query), links))
        key = (
            query.get("parsedibiurl.ibi"),
            query.get("parsedibiurl.verblist", ""),
            query.get("parsedibiurl.filepath") or None,
            links.service,
            links.files,
        )
        now = time.monotonic()
        found = None
        kept = cache.get(key)  # only answers to well-formed requests are kept
        if kept is not None:
            # The same IBI, verbs and path were checked when the answer was built; the
            # client's address is new.
            client = parse_client(query)
            if kept is _BY_CLIENT:
                kept = cache.get(key + (str(client[0]),))
        if kept is not None:
            found, checked = kept
            # Trusted, `checked` stays: once the trust lapses, the first use checks.
            if now - checked >= self.CHECK_EVERY and not self._current():
                if found.holds(self._disk_checks):
                    # In place: a new object a second per answer would age into the oldest
                    # generation and set off full collections (tens of ms) every few seconds.
                    kept[1] = now
                else:
                    found = None
        if found is None:
            request = parse_url_request(query)
            found, by_client = self._render(request, links)
            cache = self.catalog.answer_cache()  # building may have moved to a newer index
            if by_client:
                self._keep(cache, key, _BY_CLIENT)
                key += (str(request.client_ips[0]),)
            self._keep(cache, key, [found, now])
        return found.body(self.urlkeys or process_urlkeys())

    def _keep(self, cache: dict, key: tuple, value) -> None:
        """`value` kept under `key` in `cache` (answer_cache), the oldest entries out past
        ANSWERS."""
        with self._keeping:
            while len(cache) >= self.ANSWERS:
                del cache[next(iter(cache))]  # the oldest: dicts keep insertion order
            cache[key] = value

    def _render(self, request: UrlRequest, links: Links) -> tuple[Rendered, bool]:
        trace = self._trace
        trace.checks, trace.by_client = [], False
        try:
            answer = self._filtered(request, links)
            return Rendered.of(answer, trace.checks), trace.by_client
        finally:
            trace.checks = None

    def _filtered(self, request: UrlRequest, links: Links) -> list[tuple[str, str]]:
        """MontarListaDeURL then FiltrarListaDeURL, without the urlkey. Only the item itself
        (for its `ibi` pair) and the relation the verbs name are built: the filter would drop
        every other relation, so the answer is the same at a cost that does not grow with
        the Archive."""
        relation = request.verbs.relation
        if relation:
            # Of the item's own pairs the filter keeps only `ibi`: add that one instead of
            # building its URL, state and timestamp to drop them (a third of the work).
            answer = self.montar_lista_de_url(request, links, [relation], urlkey=False)
            if answer and ("state", "Deleted") not in answer:
                answer.append(("ibi", self.lookup(request.ibi).forms.render()))
        else:
            answer = self.montar_lista_de_url(request, links, [()], urlkey=False)
        return filtrar_lista_de_url(answer, request.verbs)


@lru_cache(maxsize=1)
def software_time() -> datetime:
    """When the running archive-service was installed or last changed: the newest
    modification time among its modules and templates, to the second."""
    package = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # archive_service
    try:
        # os.walk, not Path.rglob: a third to a half of its time, paid by every CGI request.
        newest = max(
            os.stat(os.path.join(folder, name)).st_mtime
            for folder, _, names in os.walk(package)
            for name in names
            if name.endswith((".py", ".html"))
        )
    except (OSError, ValueError):  # not files on disk (a zip): the time it was first asked
        newest = time.time()
    return datetime.fromtimestamp(int(newest), tz=UTC)


def service_item(name: Ibi, forms: Forms) -> Item:
    """The Archive's own service as an item (§7.1): an Original, the data of its page.

    Its timestamp is the time of the software that answers as the service (software_time):
    the same in every worker and every process (gunicorn, mod_wsgi, CGI) and across
    restarts, and it changes when that software does. A start time would differ from one
    process to the next, and a CGI process starts for every request."""
    return Item(
        directory="",
        name=name,
        forms=forms,
        state="Original",
        contenttype="Data",
        language="en",
        timestamp=software_time(),
        target=None,
    )


def _is_url_pair(name: str) -> bool:
    return name == "url" or name.startswith("url.")


def iso(item: Item) -> str:
    # Timestamps are UTC (sidecar.parse_timestamp, index._utc); isoformat is twice as fast
    # as strftime and [:19] drops microseconds and offset as the %S...Z format does.
    return item.timestamp.isoformat()[:19] + "Z"


def filtrar_lista_de_url(answer: list[tuple[str, str]], verbs: Verbs) -> list[tuple[str, str]]:
    """FiltrarListaDeURL (§4.3): keep what the resolver needs for the relation the verbs name."""
    pattern = qualifier_pattern(verbs.relation)
    deleted = ("state", "Deleted") in answer
    kept = []
    for name, value in answer:
        if name in ID_PAIRS or (name == "ibi.nextedition" and verbs.last_edition):
            kept.append((name, value))
            continue
        if deleted and name in ("state", "timestamp"):
            kept.append((name, value))
            continue
        prefix, dot, rest = name.partition(".")
        if prefix in RELATED_PREFIXES and pattern.fullmatch(dot + rest):
            kept.append((name, value))
    if any(name.startswith("url") for name, _ in kept):
        kept += [(n, v) for n, v in answer if n == "urlkey"]
    return kept


def client_allowed(item: Item, user: ipaddress.IPv4Address | ipaddress.IPv6Address | None) -> bool:
    """The rule of a licensed item (`access: networks`): its files, and their list, go only
    to users inside its networks; a user whose address is unknown is outside. The answers
    (url_of) and the web server's /col/ and file-list pages both ask here."""
    if not item.networks:
        return True
    if user is None:
        return False
    # An IPv4 user as a dual-stack socket names it (::ffff:a.b.c.d, in a resolver's
    # clientinformation.ipaddress) is that IPv4 user: /col/ unmapped it, the answer did not.
    user = getattr(user, "ipv4_mapped", None) or user
    nets = item.networks
    return (nets if isinstance(nets, Networks) else Networks(nets)).holds(user)


def monta_resposta(query: dict[str, str], archive: Archive, links: Links) -> str:
    """Algorithm 1 (MontarResposta): the body for one decoded request; RequestError if bad."""
    subject = query.get("servicesubject")
    if not subject:
        raise RequestError("servicesubject is missing")
    if subject == "inclusionConfirmationRequest":
        return pairsmod.render([("confirmation", "yes")])
    if subject == "urlRequest":
        return archive.url_request_body(query, links)
    if subject == "acknowledgment":
        check_acknowledgment(query)
        return pairsmod.render([("notice", "{acknowledgment received}")])
    raise RequestError("unknown servicesubject")
