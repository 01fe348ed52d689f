"""What an import did (or, in a dry run, would do): the counts its last line prints and one
line per action (imports/apply.py fills it in).

A relation counts once for each sidecar key an import writes or takes out for it: `edition_of`
the older item's `nextedition`, `metadata_of` the described item's `metadata`, and
`translation_of` the translation's own `translations` (written on that one side; the index
derives the other, so a translation is one relation, not two)."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Summary:
    dry_run: bool = False
    minted: int = 0
    updated: int = 0
    unchanged: int = 0
    deleted: int = 0
    linked: int = 0  # relations set or taken out (see above)
    actions: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    ibis: dict[str, str] = field(default_factory=dict)  # source id -> IBI (live records)

    def line(self) -> str:
        verb = "would be " if self.dry_run else ""
        return (
            f"{self.minted} {verb}minted, {self.updated} {verb}updated, {self.deleted} "
            f"{verb}turned into tombstones, {self.linked} relations {verb}set, "
            f"{self.unchanged} unchanged"
        )

    def linked_translation(self, ibi: str, now: dict | None) -> None:
        """`ibi`'s `translations` became `now` (another value, or none)."""
        self.linked += 1
        if now:
            (language, other), *_ = now.items()
            verb = "would set" if self.dry_run else "set"
            self.actions.append(f"{verb} translations {language} {other} on {ibi}")
        else:
            verb = "would take" if self.dry_run else "took"
            self.actions.append(f"{verb} translations out of {ibi} (no record says so any longer)")
