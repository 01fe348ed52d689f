"""The verbs (Tables 6.4, 6.5, 7.5): one table that the Archive's answers, the resolver's
persistent URLs and the questions it asks all read.

A verb has its name (Table 6.4), the grammar of its parameter, the step of a relation it names
(its letter in the relation's shape and its qualifier, Table 7.5) and its persistent-URL
modifier (Table 6.5); its rendering as a verb and as a qualifier follows from these. How the
Archive follows a step is `answers.Archive.FOLLOW`. Adding a verb: ARCHITECTURE.md, "A new
verb".
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cached_property, lru_cache

from .errors import RequestError
from .language import LANGUAGE

ALL = "*"  # a step given without its parameter that stands for each (GetTranslation, Ex. 7.3)


class UnknownStep(LookupError):
    """A step of a relation that no verb of the table names: an error, never a default."""


@dataclass(frozen=True, eq=False)  # one object per verb: compared and hashed by identity
class Verb:
    name: str  # Table 6.4
    step: str | None  # its letter in the relation's shape; None: it names no step
    qualifier: str = ""  # Table 7.5
    modifier: str | None = None  # Table 6.5; None: none
    parameter: str | None = None  # the regex of its parameter; None: it takes none
    written: str = ""  # the parameter as the grammar writes it, for messages
    refusal: str = ""  # why a parameter is refused, `{!r}` standing for it
    bare: str | None = None  # what the verb without a parameter asks for (ALL: each one)

    def accepts(self, arg: str) -> bool:
        return self.parameter is not None and re.fullmatch(self.parameter, arg) is not None

    def word(self, arg: str | None = None) -> str:
        return self.name + (f"({arg})" if arg not in (None, ALL) else "")

    def qualify(self, arg: str | None = None) -> str:
        return self.qualifier + (f"({arg})" if arg not in (None, ALL) else "")


@dataclass(frozen=True, eq=False)
class Table:
    verbs: tuple[Verb, ...]
    shape: str  # the orders of steps that name a relation: a regex over the steps' letters
    shape_rule: str  # the same for a persistent URL's modifier, in words

    def with_verb(self, verb: Verb, shape: str, shape_rule: str | None = None) -> Table:
        """A copy of this table with one verb more (and the shape that places its step)."""
        return Table((*self.verbs, verb), shape, shape_rule or self.shape_rule)

    @cached_property
    def _named(self) -> dict[str, Verb]:
        return {verb.name: verb for verb in self.verbs}

    @cached_property
    def _stepped(self) -> dict[str, Verb]:
        return {verb.step: verb for verb in self.verbs if verb.step}

    @cached_property
    def _modified(self) -> tuple[Verb, ...]:
        return tuple(verb for verb in self.verbs if verb.modifier)

    @cached_property
    def modifier_start(self) -> str:
        """The characters a modifier starts with: where an IBI in a persistent URL ends."""
        return "".join(verb.modifier[0] for verb in self._modified)

    def by_step(self, letter: str) -> Verb:
        verb = self._stepped.get(letter)
        if verb is None:
            raise UnknownStep(f"no verb names the step {letter!r}")
        return verb

    def fits(self, steps: str) -> bool:
        """Whether steps in this order (their letters) name a relation."""
        return re.fullmatch(self.shape, steps) is not None

    def read_word(self, word: str) -> tuple[Verb, str | None]:
        """A verb as a verb list writes it (`GetTranslation(pt)`), with its parameter."""
        name, paren, rest = word.partition("(")
        verb = self._named.get(name)
        if verb is not None and not paren:
            return verb, None
        if verb is not None and rest.endswith(")") and verb.accepts(rest[:-1]):
            return verb, rest[:-1]
        raise RequestError(f"unknown verb {word}")

    def modifier_words(self, mdf: str) -> list[str]:
        """The verbs of a persistent URL's modifier (Table 6.5), in order: `!+(pt):` gives
        GetLastEdition GetTranslation(pt) GetMetadata; ValueError saying what is wrong."""
        words, shape, position = [], "", 0
        while position < len(mdf):
            verb = next((v for v in self._modified if mdf.startswith(v.modifier, position)), None)
            if verb is None:
                offered = [
                    text
                    for v in self._modified
                    for text in [v.modifier] + [f"{v.modifier}({v.written})"] * bool(v.parameter)
                ]
                raise ValueError(
                    f"modifier {mdf!r}: {mdf[position:]!r} at character {position + 1} is not "
                    f"{', '.join(offered[:-1])} or {offered[-1]}"
                )
            position += len(verb.modifier)
            # The parameter is taken whatever it is, so that a bad one gets its own message.
            given = _PARAMETER.match(mdf, position) if verb.parameter else None
            arg = given.group(1) if given else None
            if given:
                if not verb.accepts(arg):
                    raise ValueError(f"modifier {mdf!r}: " + verb.refusal.format(arg))
                position = given.end()
            shape += verb.step or ""
            words.append(verb.word(arg))
        if not self.fits(shape):
            raise ValueError(f"modifier {mdf!r} is not one of Table 6.2: {self.shape_rule}")
        return words


_PARAMETER = re.compile(r"\(([^()]*)\)")


LAST_EDITION = Verb("GetLastEdition", "u", ".lastedition", "!")
TRANSLATION = Verb(
    "GetTranslation",
    "t",
    ".translation",
    "+",
    LANGUAGE,
    "lang[-CC]",
    "translation language {!r} must be 2 small letters, optionally '-' and a "
    "2-capital-letter country (e.g. pt or pt-BR)",
    bare=ALL,
)
METADATA = Verb(
    "GetMetadata",
    "m",
    ".metadata",
    ":",
    "oai_dc",
    "oai_dc",
    "metadata format {!r} is not offered; the one format is oai_dc",
)
FILE_LIST = Verb("GetFileList", None)  # position irrelevant: it names the URL, not a relation

VERBS = Table(
    (LAST_EDITION, TRANSLATION, METADATA, FILE_LIST),
    # relation = ([u [t]] | [t [u]]) [m [t]]  (Table 7.5; the modifier's, Table 6.1)
    r"(?:ut?|tu?)?(?:mt?)?",
    "'!' and '+' may each come once before ':', and one '+' after it",
)


# ---------------------------------------------------------------------------- relations


@dataclass(frozen=True)
class Step:
    """One step of a relation: its verb (or that verb's letter in VERBS) and parameter."""

    verb: Verb
    arg: str | None = None  # its parameter, or ALL

    def __post_init__(self):
        if isinstance(self.verb, str):
            object.__setattr__(self, "verb", VERBS.by_step(self.verb))
        elif not self.verb.step:
            raise UnknownStep(f"{self.verb.name} names no step of a relation")

    @property
    def kind(self) -> str:
        return self.verb.step

    def qualifier(self, arg: str | None = None) -> str:
        """`.translation(pt)`; a step standing for each parameter takes the one `arg` found."""
        return self.verb.qualify(arg if self.arg == ALL else self.arg)

    def word(self) -> str:
        return self.verb.word(self.arg)


Relation = tuple[Step, ...]


def relation_name(relation: Relation) -> str:
    return "".join(step.qualifier() for step in relation)


@dataclass(frozen=True)
class Verbs:
    relation: Relation = ()
    filelist: bool = False
    last_edition: bool = False

    @property
    def empty(self) -> bool:
        return not self.relation and not self.filelist

    @property
    def verblist(self) -> str:
        words = [step.word() for step in self.relation]
        return " ".join(words + [FILE_LIST.name] if self.filelist else words)


# Table 6.4 joins verbs with "+" (a "+" in a query string arrives as a blank, "%2B" as "+");
# Example 8.2 sends blanks. Runs of either, tabs and newlines too, separate verbs.
_SEPARATORS = re.compile(r"[\s+]+")


def split_verbs(text: str) -> list[str]:
    return [word for word in _SEPARATORS.split(text) if word]


@lru_cache(maxsize=1024)  # resolvers send few distinct verb lists; Verbs is immutable
def parse_verblist(text: str, table: Table = VERBS) -> Verbs:
    """Parse `parsedibiurl.verblist` (Table 6.4): verbs joined by `+` or by blanks."""
    steps: list[Step] = []
    filelist = False
    for word in split_verbs(text):
        verb, arg = table.read_word(word)
        if verb.step is None:
            filelist = True
        else:
            steps.append(Step(verb, verb.bare if arg is None else arg))
    if not table.fits("".join(step.kind for step in steps)):
        raise RequestError("verb order names no relation of Table 7.5")
    return Verbs(tuple(steps), filelist, any(step.verb is LAST_EDITION for step in steps))


@lru_cache(maxsize=1024)  # one pattern per relation asked; Relation is a tuple of frozen Steps
def qualifier_pattern(relation: Relation) -> re.Pattern:
    """The qualifiers of the pairs that answer `relation`. A step standing for each parameter
    (GetTranslation: each language) matches each, or none, as a group of the match."""
    parts = []
    for step in relation:
        if step.arg == ALL:
            parts.append(re.escape(step.verb.qualifier) + rf"(?:\(({step.verb.parameter})\))?")
        else:
            parts.append(re.escape(step.qualifier()))
    return re.compile("".join(parts))
