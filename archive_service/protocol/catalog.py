"""The item model answers are made from: an `Item` record, the `Catalog` interface that finds
items (two implementations: the in-memory `collection.items.Catalog` and the SQLite
`index.catalog.StoreCatalog`), the edition chain, and the claim rule that decides which of
several directories claiming one IBI is served.

Protocol level: no file system, no web framework. How an item is read from disk lives in
collection/; how it is stored in the index lives in index/.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import NamedTuple, Protocol

from .ibi import Forms, Ibi

DOC = "doc"  # the directory of an item holding its files (SPEC §7)


@dataclass
class Item:
    directory: str  # path relative to the collection, '/'-separated, as on disk
    name: Ibi  # the IBI the directory is named by
    forms: Forms  # every form this Archive knows the IBI by
    state: str
    contenttype: str
    language: str | None
    timestamp: datetime
    target: str | None  # file under doc/ opened by the bare persistent URL; None: the file list
    nextedition: Ibi | None = None
    translations: dict[str, Ibi] = field(default_factory=dict)
    metadata: Ibi | None = None
    formats: dict[str, str] = field(default_factory=dict)
    dc: dict[str, list[str]] | None = None
    filelist_public: bool = True
    networks: tuple = ()
    location: str | None = None  # http(s) URL where the content lives: the item's url

    @property
    def primary(self) -> Forms:
        """The form the Archive files the item under: its directory name."""
        return Forms.of(self.name)

    def keys(self) -> list[str]:
        return self.forms.keys()


class Catalog(Protocol):
    """What answers ask of a collection: every item found by either form of its IBI in any
    case (`lookup`), by its directory (`item_at`), and the languages held."""

    root: Path
    languages: set[str]
    has_unlanguaged: bool

    def lookup(self, text: str | Ibi) -> Item | None: ...

    def item_at(self, directory: str) -> Item | None: ...

    def answer_cache(self) -> dict | None:
        """A dict for answers while the catalog does not change, or None: keep none."""
        ...


class Editions(NamedTuple):
    last: Item  # the last edition reached among the items held
    ends_here: bool  # `last` has no next edition: the chain neither leaves nor loops
    cycle_at: Item | None  # the item the chain met a second time, if it loops


def follow_editions(lookup: Callable[[Ibi], Item | None], item: Item) -> Editions:
    """Follow nextedition from `item` through the items `lookup` finds (answers and deposit
    follow the chain this way; the catalog's cycle check, `items.edition_cycles`, walks the
    same links once for every item, and a property test holds it to this function)."""
    seen = {item.name.key}
    while item.nextedition is not None:
        nxt = lookup(item.nextedition)
        if nxt is None:
            return Editions(item, False, None)
        if nxt.name.key in seen:
            return Editions(item, False, nxt)
        seen.add(nxt.name.key)
        item = nxt
    return Editions(item, True, None)


# Translations an item's page and OAI record list (by language), at most: each is a look-up
# of another item, and a sidecar may name 1,700 (issue 30, tenth adversarial pass: 100 such
# sidecars made each of their pages and records 0.4 s). The protocol answers every one.
LISTED_TRANSLATIONS = 100


def listed_translations(item: Item) -> list[tuple[str, Ibi]]:
    """`item`'s translations as its page and its OAI record list them: by language, the
    first LISTED_TRANSLATIONS."""
    return sorted(item.translations.items())[:LISTED_TRANSLATIONS]


# ------------------------------------------------------------------------- the claim rule

SEP = "\x01"  # sorts below every character of a directory name: key order = walk order


def sortkey(directory: str) -> str:
    return directory.replace("/", SEP)


def directory_of(key: str) -> str:
    return key.replace(SEP, "/")


def claim(key: str) -> str:
    """The precedence of an item's claim to its IBIs (`key`: its directory's sortkey): a
    directory named by the repository name (where the standard files an item) before an
    IBIp directory, then collection order. The lower claim goes first."""
    return ("0" if key.count(SEP) == 3 else "1") + key


def claimant(text: str) -> str:
    """The sortkey of the directory making the claim `text`."""
    return text[1:]


def is_served(
    key: str, keys: Iterable[str], earlier: Callable[[str, str], Iterable[str]], served
) -> bool:
    """The one claim rule: the item at sortkey `key`, claiming the IBI keys `keys`, is
    served unless a served item with an earlier claim (`claim`) claims one of them.
    `earlier(k, claim(key))` gives the sortkeys of the directories claiming `k` before it,
    `served(sortkey)` whether one of them is served (the index decides it lazily, the
    in-memory catalog in claim order)."""
    mine = claim(key)
    return not any(served(other) for k in keys for other in earlier(k, mine))
