"""What every import source yields: one `Record` per item of the source, in the source's own
terms (its id, its relations by its own ids). Applying records to the collection — minting,
updating, turning deletions into tombstones, the source-id → IBI mapping — is one function
elsewhere; a source only reads and translates."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

# Relations a record may name by the source's own ids (the sidecar keys they become:
# nextedition is written on the older edition, translations and metadata on the item).
EDITION_OF, TRANSLATION_OF, METADATA_OF = "edition_of", "translation_of", "metadata_of"
RELATIONS = (EDITION_OF, TRANSLATION_OF, METADATA_OF)


@dataclass(frozen=True)
class Record:
    """One item of a source.

    `source_id` is stable across runs (a manifest's id column, a bag's directory name, an OAI
    identifier); `deleted` marks what the source no longer holds (it becomes a Deleted
    tombstone). An item has `files` (local files that become its `doc/`), or a `location`
    (an http(s) URL where its content lives, served as its `url`), or both."""

    source_id: str
    location: str | None = None
    files: tuple[Path, ...] = ()
    title: str | None = None
    language: str | None = None
    date: str | None = None
    relations: Mapping[str, str] = field(default_factory=dict)  # RELATIONS key -> source_id
    dc: Mapping[str, tuple[str, ...]] = field(default_factory=dict)  # inline Dublin Core
    deleted: bool = False
    where: str = ""  # for error messages: "manifest.csv line 12", "bag foo/", "oai record X"
