"""Generated collections for tests and benchmarks: any size, realistic shape, reproducible.

`make_collection(root, 10_000)` writes items the way a repository keeps them: four-segment
repository-name directories (some two-segment IBIp directories), sidecars with editions,
translations, metadata items and inline Dublin Core, and one to five small files under `doc/`.
The same `seed` gives the same collection (names, sidecars and file contents).
"""

from __future__ import annotations

import os
import random
from dataclasses import dataclass
from pathlib import Path

from .protocol.ibi import IBIP_DIGITS

HOSTS = ("sid.inpe.br", "dpi.inpe.br", "archive.example.org")
WORDS = ("mtc-m18", "mtc-m19@80", "banon", "col-a", "col-b", "theses", "reports")
LANGUAGES = ("en", "pt-BR", "fr", "es")


@dataclass(frozen=True)
class GeneratedItem:
    directory: str  # relative to the collection root
    rep: str | None
    ibip: str | None
    sidecar: str  # the text written to item.yaml ('' when the item has none)


def rep_name(i: int) -> str:
    """A unique, valid repository name for the i-th item."""
    host = HOSTS[i % len(HOSTS)]
    word = WORDS[(i // len(HOSTS)) % len(WORDS)]
    year = 1990 + (i // (len(HOSTS) * len(WORDS))) % 30
    j = i // (len(HOSTS) * len(WORDS) * 30)
    month, day = 1 + j % 12, 1 + (j // 12) % 28
    hour, minute, second = (j // 336) % 24, (j // 8064) % 60, (j // 483840) % 60
    when = f"{month:02d}.{day:02d}.{hour:02d}.{minute:02d}"
    if second:
        when += f".{second:02d}"
    return f"{host}/{word}/{year}/{when}"


def ibip_name(i: int) -> str:
    """A unique, valid IBIp for the i-th item (base-27 digits, ID Table 7.1)."""
    digits = ""
    n = i + 27**5
    while n:
        n, d = divmod(n, 27)
        digits = IBIP_DIGITS[d] + digits
    return f"8JMKD3MGP8W/{digits}"


def _sidecar(
    i: int, count: int, rng: random.Random, rep: str, ibip: str | None, files: list[str]
) -> str:
    lines = []
    if ibip and i % 20 != 0:
        lines.append(f"ibip: {ibip}")
    if i % 20 == 0:  # every 20th item lives in an IBIp directory and names its rep
        lines.append(f"rep: {rep}")
    if i % 10 == 6:  # the translation item i - 1 declares
        lines.append("language: pt-BR")
    elif rng.random() < 0.7:
        lines.append(f"language: {LANGUAGES[i % len(LANGUAGES)]}")
    if rng.random() < 0.5:
        lines.append(f'timestamp: "20{i % 24:02d}-0{1 + i % 9}-1{i % 9}T1{i % 10}:0{i % 10}:00Z"')
    if files and rng.random() < 0.5:
        lines.append(f"target: {files[-1]}")
    if i + 1 < count and i % 10 == 3:
        lines.append(f"nextedition: {rep_name(i + 1)}")
    if i + 1 < count and i % 10 == 5:
        lines.append("translations:")
        lines.append(f"  pt-BR: {rep_name(i + 1)}")
    if i % 10 == 7:
        lines.append(f"metadata: {rep_name((i * 7 + 1) % count)}")
    elif i % 10 == 8:
        lines.append("dc:")
        lines.append(f"  title: Generated item number {i}")
        lines.append(f"  creator: [Author {i % 97}, Author {i % 89}]")
        lines.append(f"  date: '{1990 + i % 30}'")
    if i % 50 == 9:
        lines.append("state: Copy")
    if i % 200 == 13:
        lines.append("filelist: private")
    return "\n".join(lines) + "\n" if lines else ""


def make_collection(
    root: str | os.PathLike, count: int, *, seed: int = 0, start: int = 0
) -> list[GeneratedItem]:
    """Write items number `start` .. `start + count - 1` under `root` and describe them."""
    root = Path(root)
    rng = random.Random(seed * 1_000_003 + start)
    made = []
    total = start + count
    for i in range(start, total):
        rep = rep_name(i)
        ibip = ibip_name(i) if i % 3 == 0 or i % 20 == 0 else None
        directory = ibip if i % 20 == 0 else rep
        path = root / directory
        doc = path / "doc"
        doc.mkdir(parents=True, exist_ok=True)
        names = [f"part-{k}.txt" for k in range(rng.randint(1, 5))]
        if i % 4 == 0:
            names[0] = "index.html"
        for k, name in enumerate(names):
            (doc / name).write_bytes(f"item {i} file {k}\n".encode() * rng.randint(1, 40))
        text = _sidecar(i, total, rng, rep, ibip, names)
        if text:
            (path / "item.yaml").write_text(text, encoding="utf-8")
        made.append(GeneratedItem(directory, rep, ibip, text))
    return made


def dump(store) -> dict:
    """Everything in a store that a clean build of the same collection must reproduce
    (all rows; of the facts about the index itself, only those the collection determines)."""
    import sqlite3

    conn = sqlite3.connect(store.path)
    try:
        tables = {
            t: conn.execute(
                f"SELECT * FROM {t} ORDER BY {'1' if t == 'conflicts' else '1, 2'}"
            ).fetchall()
            for t in ("items", "keys", "refs", "langs", "kinds", "conflicts")
        }
        meta = dict(conn.execute("SELECT key, value FROM meta"))
        # The search rows by item, not by id (ids follow the order items were written in);
        # every row of the FTS table, so one left behind by a removed item shows.
        tables["search"] = conn.execute(
            "SELECT d.sortkey, s.ibi, s.title, s.date FROM search s LEFT JOIN search_ids d "
            "ON d.id = s.rowid ORDER BY 1, 2, 3, 4"
        ).fetchall()
    finally:
        conn.close()
    tables["meta"] = {k: meta.get(k) for k in ("schema", "collection", "complete", "dirs")}
    return tables


def wait_until(predicate, timeout: float, interval: float = 0.01) -> bool:
    """Poll `predicate` until it is true (True) or `timeout` seconds pass (False)."""
    import time

    deadline = time.monotonic() + timeout
    while True:
        if predicate():
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(interval)
