"""The Archive's last known inclusion in its resolver, as a small JSON file in the state dir.

The announcer (a separate process) writes it; the pages, `/health` and the CLI read it. It is
a file rather than a row in the store because it describes this node's own announcement, and
because the announcer must not need the index to say what happened.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from .files import replace_file

FILE = "inclusion.json"

# What the announcer knows of the inclusion. `not-joined`: no registration key, nothing is
# announced; `announcing`: waiting for the service or the resolver; `included`: the resolver
# said included and confirmed it; `unconfirmed`: included but the resolver could not confirm
# (our confirmation URL did not answer it); `excluded`: the resolver refused or removed us;
# `failed`: the resolver (or the shared database) could not be reached (retries go on);
# `standby`: several nodes serve this Archive and another one holds its membership
# (serve/membership.py); `left`: the service stopped (the detail says whether it excluded).
STATES = (
    "not-joined",
    "announcing",
    "included",
    "unconfirmed",
    "excluded",
    "failed",
    "left",
    "standby",
)


@dataclass(frozen=True)
class Inclusion:
    state: str
    resolver: str = ""
    detail: str = ""
    time: float = 0.0


def record(state_dir: str | Path, state: str, resolver: str = "", detail: str = "") -> None:
    """Write the current inclusion state; never raises (a read-only state dir must not stop
    the announcer, which logs the outcome anyway)."""
    if state not in STATES:
        raise ValueError(f"unknown inclusion state {state!r}")
    try:
        replace_file(
            Path(state_dir) / FILE,
            json.dumps(asdict(Inclusion(state, resolver, detail, time.time()))),
        )
    except OSError:
        pass


def read(state_dir: str | Path) -> Inclusion | None:
    """The last recorded inclusion, or None if none was recorded or the file is unreadable."""
    try:
        data = json.loads((Path(state_dir) / FILE).read_text(encoding="utf-8"))
        return Inclusion(
            str(data["state"]),
            str(data.get("resolver", "")),
            str(data.get("detail", "")),
            float(data.get("time", 0.0)),
        )
    except (OSError, ValueError, KeyError, TypeError):
        return None
