"""The resolution process (§6.2): which answer to take, what to ask next, what to acknowledge.

Plain logic: the network is behind `ask(question) -> [Answer]`, so one function drives the
whole loop of Figure 6.1 whatever carries the messages.

- Every included Archive gets the same urlRequest (Table 6.9); the language preference and
  the required status stay here (privacy rule of §6.2).
- Selection: with `ibiurl.requireditemstatus=Original`, among the answers that give the URL,
  the single one claiming Original; two or more claims are an alert naming the suspects
  (every Archive is waited for). In all other cases the best non-empty answer among those
  received: the user's language first, then an answer with the URL over one to follow, then
  an Original over a Copy, and only then arrival order. Once the answers in hand are enough,
  the others are waited for only briefly (ArchiveClient.ask_all), so the seed's "first
  non-empty answer" still shows: an Archive far slower than another that answers too may
  lose to it. An answer's URLs the user must not be sent to are dropped (`url_problem`).
- Claims: an Archive is trusted to name its own items, nothing more. Without the Original
  required, when several Archives claim the Original of an IBI only one claim stands
  (`settle_claims`): the naming authority's (protocol/authority.py, waited for), else the
  remembered claimant's, else the first; the others are refused, and reported.
- Following: an answer without the URL for the relation but with the IBI of the related item
  (`ibi<r>`) is asked again for that IBI; with GetLastEdition first and no `.lastedition`
  pairs, `ibi.nextedition` is asked again with the same verbs (Example 8.2). The number of
  rounds is bounded and a question asked twice is a cycle.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Protocol
from urllib.parse import urlsplit

from werkzeug.datastructures import LanguageAccept
from werkzeug.http import parse_accept_header

from ..common import net
from ..protocol import authority
from ..protocol import ibi as ibimod
from ..protocol import pairs as pairsmod
from ..protocol.verbs import LAST_EDITION, Relation, Verbs, qualifier_pattern
from . import lookups
from .purl import PersistentUrl

log = logging.getLogger(__name__)

FOUND, FOLLOW, DELETED, LACKING = 3, 2, 1, 0  # what one answer offers, best first
# The longest URL of an Archive the user is sent to: a longer Location header is refused by
# proxies (nginx takes 4-8 KiB of headers from its upstream) and browsers alike.
MAX_URL = 8192
# The longest IBI an Archive's answer can have the resolver ask about next (a next edition, a
# translation, …): a repository name's host is at most 253 characters, and the IBI goes in
# every included Archive's urlRequest of the next round and in the answered store. A hostile
# Archive's 30,000-digit words made each resolution send 30 KB to every Archive in each of its
# `rounds` rounds and write 600 KB to the store (the seventh adversarial pass).
MAX_FOLLOWED_IBI = 512
# The user's language ranges weighed (a browser sends a handful): an 8 KB Accept-Language
# of 2,600 ranges against a hostile Archive's 1 MiB of translations cost 4 s of CPU per look
# at a round's answers.
MAX_LANGUAGES = 16

Preferences = tuple[tuple[str, float], ...]


# ------------------------------------------------------------------------------ messages


@dataclass(frozen=True)
class ArchiveRef:
    """An included Archive as the registry knows it (`ip`: its announced `archiveip`, which
    names the IBIps it minted: `covers`)."""

    address: str
    serviceibi: str
    ip: str = field(default="", compare=False)

    def __str__(self) -> str:
        return f"{self.address} (service {self.serviceibi})"

    @property
    def key(self) -> str:
        """Who the Archive is, whatever address it gives: its service IBI's key (the
        registry's, an Archive announces itself again under another address at will)."""
        return ibimod.key(self.serviceibi)


@dataclass(frozen=True)
class Answer:
    """One Archive's reply to a urlRequest: its pairs (empty: it does not hold the IBI), or
    `error` when it gave nothing usable (no answer in time, refused, not a list of pairs)."""

    archive: ArchiveRef
    pairs: Mapping[str, str] = field(default_factory=dict)
    order: int = 0  # arrival order
    error: str | None = None

    @classmethod
    def of(
        cls, archive: ArchiveRef, pair_list: Sequence[tuple[str, str]], order: int = 0
    ) -> Answer:
        pairs: dict[str, str] = {}
        for name, value in pair_list:
            pairs.setdefault(name, value)
        # An Archive names its own items, nothing more: a `url…` value the user must not be
        # sent to is dropped here, before any choice, so another Archive's answer can win.
        dropped = [
            (name, why)
            for name in pairs
            if (name == "url" or name.startswith("url.")) and (why := url_problem(pairs[name]))
        ]
        if dropped:
            # One line an answer: a line each made an Archive answering 2,040 of them write
            # 400 KB of log per resolution, every reader's (the tenth adversarial pass).
            name, why = dropped[0]
            more = f" ({len(dropped) - 1} more ignored)" if len(dropped) > 1 else ""
            value = pairs[name]
            log.warning("Archive %s: %.100s %.100s ignored: %s%s", archive, name, value, why, more)
            for name, _ in dropped:
                del pairs[name]
        return cls(archive, pairs, order)


def url_problem(url: str) -> str | None:
    """Why an Archive's URL cannot be where the user is sent (Location), or None.

    Table 6.11: an absolute URI of scheme http (https too). A javascript:, data: or file:
    URL, a relative one (this resolver again, in a loop), a list of words or credentials
    before the host (`http://bank.example@evil.example/`) went to the Location header and
    to the redirect page's link, a javascript: one running on the resolver's own origin."""
    if len(url) > MAX_URL:
        return f"longer than {MAX_URL} characters"
    if url.startswith("{"):
        return "a list of words, not a URL"
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises ValueError for a port that is not one
    except ValueError as exc:
        return f"not a URL ({exc})"
    if parts.scheme.lower() not in ("http", "https"):
        return "not an absolute http or https URL"
    if not parts.hostname or "@" in parts.netloc:
        return "no host, or credentials before it"
    return None


@dataclass(frozen=True)
class Question:
    """One round's urlRequest: the IBI asked about and the relation wanted of it."""

    ibi: str
    relation: Relation = ()
    filelist: bool = False

    @property
    def verblist(self) -> str:
        return Verbs(self.relation, self.filelist).verblist

    def params(self, client_ips: str, filepath: str | None) -> dict[str, str]:
        """Table 6.9: nothing else, in particular no language preference, no required status."""
        params = {
            "servicesubject": "urlRequest",
            "clientinformation.ipaddress": client_ips,
            "parsedibiurl.ibi": self.ibi,
        }
        if filepath:
            params["parsedibiurl.filepath"] = filepath
        if self.verblist:
            params["parsedibiurl.verblist"] = self.verblist
        return params


# ---------------------------------------------------------------------------- languages


def preferences(accept_language: str | None) -> Preferences:
    """The user's language ranges with their weights (q=0 means 'not this one'), the
    MAX_LANGUAGES best weighted: each is scored against every translation of every answer."""
    accepted = parse_accept_header(accept_language or None, LanguageAccept)
    return tuple((value.lower(), q) for value, q in accepted if q > 0)[:MAX_LANGUAGES]


def language_score(language: str | None, prefs: Preferences) -> tuple[float, int]:
    """How much the user wants `language`: the weight of the best range that names it, an
    exact tag before a shared primary subtag (pt-BR and pt), before `*`.

    Unlike a plain best match over the offered tags, the user's first choice pt-BR finds a
    Portuguese translation even when English is also accepted at a lower weight (the user of
    Examples 6.8 and 8.1)."""
    best = (0.0, 0)
    if not language:
        return best
    tag = language.lower()
    primary = tag.split("-")[0]
    for rng, q in prefs:
        if rng == tag:
            score = (q, 3)
        elif rng.split("-")[0] == primary:
            score = (q, 2)
        elif rng == "*":
            score = (q, 1)
        else:
            continue
        best = max(best, score)
    return best


# ------------------------------------------------------------------------------ reading


def forms_keys(value: str) -> set[str]:
    words = pairsmod.unbrace(value)
    if len(words) == 1:
        return {ibimod.key(words[0])}
    return {ibimod.key(w) for kind, w in zip(words[::2], words[1::2]) if kind in ("rep", "ibip")}


def first_form(value: str) -> str | None:
    """An IBI to ask about from a `{rep X ibip Y}` value (or a bare IBI); None if unusable."""
    words = pairsmod.unbrace(value)
    candidates = words[1::2] if len(words) > 1 else words
    for candidate in candidates:
        if len(candidate) <= MAX_FOLLOWED_IBI and ibimod.is_valid(candidate):
            return candidate
    return None


@dataclass(frozen=True)
class Match:
    """The pairs of one answer that answer the relation: `url<qualifier>`, `ibi<qualifier>`."""

    qualifier: str
    url: str | None
    ibi: str | None
    languages: tuple[str | None, ...]
    score: tuple


def best_match(pairs: Mapping[str, str], relation: Relation, prefs: Preferences) -> Match | None:
    """The qualifier that best answers `relation`: the user's languages first, then the item
    itself in its own language (the fallback of Example 6.3), then one with a URL."""
    pattern = qualifier_pattern(relation)
    own = forms_keys(pairs["ibi"]) if pairs.get("ibi") else set()
    best = None
    for qualifier in {name[3:] for name in pairs if name.startswith(("url", "ibi"))}:
        found = pattern.fullmatch(qualifier)
        if not found:
            continue
        languages = found.groups()
        url, ibi = pairs.get("url" + qualifier), pairs.get("ibi" + qualifier)
        is_self = bool(ibi) and bool(forms_keys(ibi) & own)
        score = (
            tuple(language_score(lang, prefs) for lang in languages),
            is_self,
            url is not None,
            qualifier,
        )
        if best is None or score > best.score:
            best = Match(qualifier, url, ibi, languages, score)
    return best


@dataclass(frozen=True)
class Reading:
    """What one non-empty answer offers for a question."""

    answer: Answer
    kind: int
    match: Match | None = None
    next: Question | None = None

    @property
    def state(self) -> str | None:
        qualifier = self.match.qualifier if self.match else ""
        return self.answer.pairs.get("state" + qualifier)

    @property
    def rank(self) -> tuple:
        languages = self.match.score[0] if self.match else ()
        return (languages, self.kind, self.state == "Original", -self.answer.order)


def read(answer: Answer, question: Question, prefs: Preferences) -> Reading:
    pairs = answer.pairs
    match = best_match(pairs, question.relation, prefs)
    if match is not None and match.url:
        return Reading(answer, FOUND, match)
    if match is not None and match.ibi and question.relation:
        target = first_form(match.ibi)
        if target:
            return Reading(answer, FOLLOW, match, Question(target, (), question.filelist))
    first = question.relation[0].verb if question.relation else None
    if first is LAST_EDITION and pairs.get("ibi.nextedition"):
        target = first_form(pairs["ibi.nextedition"])
        if target:
            return Reading(
                answer, FOLLOW, match, Question(target, question.relation, question.filelist)
            )
    if pairs.get("state") == "Deleted":
        return Reading(answer, DELETED)
    return Reading(answer, LACKING, match)


# ----------------------------------------------------------------------------- outcome


@dataclass(frozen=True)
class Outcome:
    """A URL to send the user to (status 302), or an alert with its HTTP status and reason."""

    status: int
    reason: str
    url: str | None = None
    reading: Reading | None = None  # the answer the URL came from (acknowledged)
    suspects: tuple[ArchiveRef, ...] = ()
    silent: tuple[ArchiveRef, ...] = ()  # Archives that gave nothing usable in the last round
    questions: tuple[Question, ...] = ()


def covers(ibi: str, archive: ArchiveRef) -> bool:
    """Whether `archive` names `ibi` by what it announced (protocol/authority.py): its service
    IBI's host and word, or the `archiveip` an IBIp encodes."""
    return authority.covers(ibi, archive.serviceibi, archive.ip)


def naming_authority(ibi: str, claimants: Sequence[Answer]) -> Answer | None:
    """The one claimant that is the naming authority of `ibi`, or None.

    An `archiveip` is what each Archive announces of itself, so two may cover one IBIp: a
    registered Archive announcing another's address covered that one's IBIps too and, before
    anyone was remembered for one, won its first resolution by answering first (the
    adversarial passes over issue 30). Of several, the one the resolver reaches at the
    address it announced (`_reached_at`) is the authority; none when that is not one either.
    One alone that covers it stays its authority wherever it is reached (behind NAT, a
    balancer), though not over a remembered claimant (`settle_claims`, `_proven`)."""
    covering = [a for a in claimants if covers(ibi, a.archive)]
    if len(covering) > 1:
        covering = [a for a in covering if _reached_at(a.archive)]
    return covering[0] if len(covering) == 1 else None


def _proven(ibi: str, archive: ArchiveRef) -> bool:
    """Whether `archive` covers `ibi` by more than the archiveip it announced: by its service
    IBI (given with its key), or by that address where the resolver reaches it."""
    return authority.covers(ibi, archive.serviceibi) or _reached_at(archive)


def _reached_at(archive: ArchiveRef) -> bool:
    """Whether the resolver reaches `archive` at its announced `archiveip`: its
    `archiveaddress` is that address, or its name's connection was last made to it
    (lookups.py `reached_at`). Not waited for: a name not yet connected to is reached nowhere."""
    want = net.address(archive.ip or "")
    if want is None:
        return False
    host, port = net.host_port(archive.address)
    if not host:
        return False
    if net.address(host) is not None:  # an address: where it leads, without a connection
        return net.address(host) == want
    # A name: the address its connection reached. Any of its addresses let a hostile's DNS
    # list the good Archive's beside its own (refused there, answered at its own).
    where = lookups.reached_at(host, port or net.HTTP_PORT)
    return where is not None and net.address(where) == want


@dataclass(frozen=True)
class Conflict:
    """A claim of the Original of `ibi` refused because `taken` holds it (the naming
    authority, or the remembered claimant): both Archives named as shown."""

    ibi: str
    taken: str
    refused: str
    why: str


@dataclass(frozen=True)
class Claims:
    """How one round's claims of the Original were settled (SPEC §6, "several claims of one
    original"): `owner`, the service IBI key of the Archive whose claim stands (None: no
    claim), and the claims refused."""

    owner: str | None = None
    conflicts: tuple[Conflict, ...] = ()
    refused: frozenset[int] = frozenset()  # `Answer.order`s of the refused answers


def is_claim(answer: Answer) -> bool:
    """Whether an answer claims the Original and offers something for it (a URL, a related
    item's IBI): one whose only URL was refused (`url_problem`) claims nothing to take."""
    pairs = answer.pairs
    return pairs.get("state") == "Original" and any(
        name.startswith(("url", "ibi.")) for name in pairs
    )


def settle_claims(
    answers: Sequence[Answer], ibi: str, owner: str | None = None, plain: bool = True
) -> Claims:
    """Whose claim of the Original of `ibi` stands among `answers`.

    The naming authority's first (`naming_authority`: the one claimant that covers the IBI,
    or of several the one reached at the address it announced). Else the remembered
    claimant's (`owner`, a service IBI key), which a new claimant does not displace while it
    is not heard saying otherwise (no answer, or not asked); else the first claimant's. An
    Archive that now answers the IBI alone (`plain`: no file path, no verb) without claiming
    the Original (empty: the item moved; a Copy) gives way; asked for a file or a relation
    it does not have, it says nothing of the Original."""
    claimants = [a for a in answers if is_claim(a)]
    heard = {ibimod.key(a.archive.serviceibi) for a in answers if not a.error}
    # Asked a file or relation, a remembered claimant's empty answer gave the IBI to any
    # claimant: one reader's `/<ibi>/no-such-file.pdf` made a hostile Archive claiming every
    # IBI the owner of one no Archive names. Nor is one not heard forgotten when nobody
    # claims: a hostile Archive answering an error to a reader's long Via, which the good
    # one refused too, took such an IBI at the next round (the ninth adversarial pass).
    stands = owner is not None and (owner not in heard or not plain)
    if not claimants:
        return Claims(owner if stands else None)
    keyed = {ibimod.key(a.archive.serviceibi): a for a in claimants}
    authority = naming_authority(ibi, claimants)
    remembered = owner is not None and (owner in keyed or stands)
    if remembered and authority is not None and not _proven(ibi, authority.archive):
        # Covering only by an archiveip it announced, not reached there, an Archive gave an
        # Archive that moved host its old IBIps, once it announced the old address (the ninth
        # adversarial pass): such an authority decides only where nobody is remembered.
        if ibimod.key(authority.archive.serviceibi) != owner:
            authority = None
    if authority is not None:
        kept, why = authority, "the naming authority of the IBI"
    elif owner in keyed:
        kept, why = keyed[owner], "the Archive remembered for the IBI"
    elif stands:  # silent, or asked what it need not hold: nobody displaces it
        named = (str(a.archive) for a in answers if ibimod.key(a.archive.serviceibi) == owner)
        shown = next(named, owner)
        why = "the Archive remembered for the IBI" + (", silent" if owner not in heard else "")
        refused = tuple(Conflict(ibi, shown, str(a.archive), why) for a in claimants)
        return Claims(owner, refused, frozenset(a.order for a in claimants))
    else:
        kept, why = claimants[0], "the first to claim it"
    others = [a for a in claimants if a is not kept]
    return Claims(
        ibimod.key(kept.archive.serviceibi),
        tuple(Conflict(ibi, str(kept.archive), str(a.archive), why) for a in others),
        frozenset(a.order for a in others),
    )


def choose(
    answers: Sequence[Answer],
    question: Question,
    prefs: Preferences,
    original_required: bool,
    claims: Claims | None = None,
) -> Reading | Outcome | None:
    """§6.2 selection over one round's answers; None when every answer is empty. Without the
    Original required, the claims `settle_claims` refused are not taken."""
    if claims is not None and not original_required:
        answers = [a for a in answers if a.order not in claims.refused]
    readings = [read(a, question, prefs) for a in answers if a.pairs]
    if not readings:
        return None
    if original_required:
        found = [r for r in readings if r.kind == FOUND]
        if found:
            originals = [r for r in found if r.state == "Original"]
            if len(originals) == 1:
                return originals[0]
            if originals:
                return Outcome(
                    409,
                    f"{len(originals)} Archives claim to hold the Original of "
                    f"{question.ibi}; at most one can: an investigation is needed",
                    suspects=tuple(r.answer.archive for r in originals),
                )
            holders = ", ".join(str(r.answer.archive) for r in found)
            return Outcome(
                404,
                f"no Archive claims to hold the Original of {question.ibi}; "
                f"copies are held by {holders}",
            )
    return max(readings, key=lambda r: r.rank)


class Memory(Protocol):
    """Which Archives answered for an IBI, and whose claim of its Original stood
    (resolver/answered.py `Answered`)."""

    def recall(self, ibi: str) -> frozenset[str] | None: ...
    def owner(self, ibi: str) -> str | None: ...
    def remember(self, ibi: str, holders: Iterable[str], owner: str | None = None) -> None: ...
    def count(self, what: str) -> None: ...


def satisfies(reading: Reading | Outcome | None) -> bool:
    """Whether a selection ends the round: a URL, or an IBI to ask about next."""
    return isinstance(reading, Reading) and reading.kind in (FOUND, FOLLOW)


def ask_round(
    question: Question,
    ask: Callable[..., Sequence[Answer]],
    memory: Memory,
    prefs: Preferences,
    original_required: bool,
    plain: bool = True,
    included: Callable[[str], bool] | None = None,
) -> tuple[list[Answer], Claims, Reading | Outcome | None]:
    """One round's answers, asking first the Archives that answered for this IBI before,
    how its claims of the Original were settled (`settle_claims`), and the selection among
    them (`choose`): each read once, not again for `enough` and the round's end (issue 35).

    Their answers are taken when they satisfy the question (`satisfies`): the seed takes
    the first non-empty answer anyway. On a miss, an empty or unsatisfying answer (an item
    that moved, was deleted, lacks the relation), every other included Archive is asked too
    and what they all answered is remembered. With the Original required every Archive is
    asked, every claim compared (two are still an alert). `ask(question, only=, skip=,
    enough=, awaited=)`: `only`/`skip` select Archives by their service IBI's key; once
    `enough(answers)` holds, slower Archives are not waited for, except those `awaited`
    (the IBI's naming authorities: a faster Archive claiming the IBI must not win the
    race against them), up to the round's deadline. `plain`: the question is the IBI alone,
    no file path and no verb (`settle_claims`). `included(key)`: whether an Archive may
    stand as an owner now (the resolver's: included, or excluded less than the registry's
    EXCLUDED_GRACE ago, a restart); an owner that may not is away: it holds nothing, and is
    not replaced.

    An owner is remembered up to a week past `answered_ttl` and, unheard, stands (the
    owners' grace, issue 30): were an away one to stand, never asked again, it would keep
    its IBIs from whoever holds them now for as long, renewed by each round."""
    known, owner = memory.recall(question.ibi), memory.owner(question.ibi)
    # Away (excluded), an owner routes nothing but is not replaced: serve's SIGTERM excludes
    # it, and one resolution during a restart made a hostile Archive claiming every IBI the
    # owner for a week (the eleventh adversarial pass). Its entry is left as it was, so it
    # stands again when back, and lapses at its `kept_until` when it is gone for good.
    away = owner is not None and included is not None and not included(owner)
    if away:
        owner = None
    if original_required:
        known = None

    last: list = [None, None, None]  # the answers `selected` last, their claims and choice

    def selected(answers: Sequence[Answer]) -> tuple[Claims, Reading | Outcome | None]:
        seen = last[0]  # held here, so an answer's id is no other's
        if (
            seen is None
            or len(seen) != len(answers)
            or any(a is not b for a, b in zip(seen, answers))
        ):
            claims = settle_claims(answers, question.ibi, owner, plain)
            last[:] = (list(answers), claims, choose(answers, question, prefs, False, claims))
        return last[1], last[2]

    def enough(answers: list[Answer]) -> bool:
        return not original_required and satisfies(selected(answers)[1])

    def awaited(archive: ArchiveRef) -> bool:
        return covers(question.ibi, archive)

    full = True
    if known:
        first = list(ask(question, only=known, enough=enough, awaited=awaited))
        if enough(first):
            memory.count("hits")
            answers, full = first, False
        else:
            memory.count("fallbacks")
            skip = frozenset(ibimod.key(a.archive.serviceibi) for a in first)
            rest = ask(question, skip=skip, enough=enough, awaited=awaited)
            answers = first + [replace(a, order=len(first) + a.order) for a in rest]
    else:
        memory.count("full" if original_required else "misses")
        answers = list(ask(question, enough=enough, awaited=awaited))
    if original_required:  # every claim compared by `choose`
        claims = settle_claims(answers, question.ibi, owner, plain)
        choice = choose(answers, question, prefs, True, claims)
    else:
        claims, choice = selected(answers)
    if not away and (full or claims.owner != owner):
        holders = {ibimod.key(a.archive.serviceibi) for a in answers if a.pairs}
        if claims.owner:  # a silent owner stays asked
            holders.add(claims.owner)
        memory.remember(question.ibi, holders, claims.owner)
    return answers, claims, choice


def resolve(
    purl: PersistentUrl,
    ask: Callable[..., Sequence[Answer]],
    accept_language: str | None = None,
    max_rounds: int = 10,
    memory: Memory | None = None,
    conflicts: Callable[[Conflict], None] | None = None,
    included: Callable[[str], bool] | None = None,
) -> Outcome:
    """Figure 6.1's loop: ask, select, follow, until a URL or an alert. Without `memory`,
    `ask(question)` asks every included Archive and waits for them all. `conflicts` is told
    each claim of an Original refused (`settle_claims`), unless the Original is required
    (two claims are then the alert). `included(key)`: whether the Archive of a service IBI
    key may stand as an owner now (`ask_round`; default: any may)."""
    prefs = preferences(accept_language)
    original_required = purl.requireditemstatus == "Original"
    question = Question(purl.ibi, purl.parsed.relation, purl.parsed.filelist)
    asked: list[Question] = []
    seen: set[tuple[str, str]] = set()

    def outcome(status: int, reason: str, **kw) -> Outcome:
        return Outcome(status, reason, questions=tuple(asked), **kw)

    while True:
        if len(asked) >= max_rounds:
            return outcome(
                508,
                f"no URL after {max_rounds} rounds of questions starting at "
                f"{purl.ibi}; the chain of editions or related items is too long",
            )
        mark = (ibimod.key(question.ibi), question.verblist)
        if mark in seen:
            chain = " -> ".join(q.ibi for q in asked + [question])
            return outcome(508, f"the Archives' answers form a cycle: {chain}")
        seen.add(mark)
        asked.append(question)
        if memory is None:
            answers = list(ask(question))
            claims = settle_claims(answers, question.ibi)
            choice = choose(answers, question, prefs, original_required, claims)
        else:
            plain = not purl.filepath and not question.verblist  # the IBI alone (`settle_claims`)
            answers, claims, choice = ask_round(
                question, ask, memory, prefs, original_required, plain, included
            )
        if conflicts is not None and not original_required:
            for conflict in claims.conflicts:
                conflicts(conflict)
        silent = tuple(a.archive for a in answers if a.error)
        via = f" (reached from {purl.ibi})" if len(asked) > 1 else ""
        if isinstance(choice, Outcome):
            return outcome(choice.status, choice.reason, suspects=choice.suspects, silent=silent)
        if choice is None:
            if not answers:
                return outcome(503, "no Archive is included in this resolver")
            if len(silent) == len(answers):
                return outcome(
                    502, f"none of the {len(answers)} included Archives answered", silent=silent
                )
            unheard = f"; {len(silent)} of them did not answer" if silent else ""
            return outcome(
                404,
                f"{question.ibi}{via} is not known to any of the "
                f"{len(answers)} included Archives{unheard}",
                silent=silent,
            )
        if choice.kind == FOUND:
            return outcome(302, "found", url=choice.match.url, reading=choice, silent=silent)
        if choice.kind == FOLLOW:
            question = choice.next
            continue
        if choice.kind == DELETED:
            when = choice.answer.pairs.get("timestamp", "an unknown date")
            return outcome(
                404,
                f"{question.ibi}{via} was removed on {when} (state Deleted at "
                f"{choice.answer.archive})",
                silent=silent,
            )
        wanted = f" with verbs {question.verblist}" if question.verblist else ""
        if purl.filepath:
            wanted += f" and file {purl.filepath}"
        return outcome(
            404, f"no Archive gives a URL for {question.ibi}{via}{wanted}", silent=silent
        )


def acknowledgment(reading: Reading, client_ips: str, persistent_url: str) -> dict[str, str]:
    """Table 6.11: what the resolver tells the Archive whose URL it sends the user to."""
    match, pairs = reading.match, reading.answer.pairs
    params = {
        "servicesubject": "acknowledgment",
        "clientinformation.ipaddress": client_ips,
        "contenttype": pairs.get("contenttype" + match.qualifier),
        "ibi": " ".join(pairsmod.unbrace(match.ibi)) if match.ibi else None,
        "state": pairs.get("state" + match.qualifier),
        "url": match.url,
        "url.persistent": persistent_url,
        "urlkey": pairs.get("urlkey"),
    }
    return {name: value for name, value in params.items() if value}
