"""The language tag of the protocol: `lang[-CC]` (Table A.1 of seed 000, SPEC §4.2, §7).

`idioma = 2ALFAMI` and `pais = 2ALFAMA`: two small letters (ISO 639-1), optionally `-` and two
capital letters (ISO 3166-1). Verbs, persistent-URL modifiers and answers' qualifiers are read
as written (`LANGUAGE`); a sidecar or an imported record, written by people, may use any case
and is stored as the standard writes it (`language_tag(text, any_case=True)`).
"""

from __future__ import annotations

import re

LANGUAGE = r"[a-z]{2}(?:-[A-Z]{2})?"  # no groups: other patterns embed it
_AS_WRITTEN = re.compile(LANGUAGE)
# ASCII: with IGNORECASE alone, [a-z] also matches the Kelvin sign and the long s.
_ANY_CASE = re.compile(LANGUAGE, re.IGNORECASE | re.ASCII)


def language_tag(text: str, *, any_case: bool = False) -> str:
    """`text` as the standard writes a language tag; ValueError saying what is wrong.

    With `any_case`, `PT-br` is read as `pt-BR`; without it, only `pt-BR` is one."""
    if (_ANY_CASE if any_case else _AS_WRITTEN).fullmatch(text):
        lang, _, country = text.partition("-")
        return lang.lower() + (f"-{country.upper()}" if country else "")
    if any_case:
        raise ValueError(f"{text!r} is not lang[-CC] (two letters, optionally '-' and two more)")
    raise ValueError(
        f"{text!r} is not lang[-CC]: 2 small letters, optionally '-' and a 2-capital-letter "
        "country (e.g. pt or pt-BR)"
    )
