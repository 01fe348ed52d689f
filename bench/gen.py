"""Generate a realistic collection of N items for the benchmarks, once, into a cache directory.

Layout follows SPEC §7: four-level repository names spread over hosts, words and years, a few
items stored under their IBIp, sidecars carrying relations (edition chains, translations held
here and elsewhere, metadata items with an oai_dc format, inline Dublin Core), some items with
no sidecar, Copy and Deleted items, licensed items, 1-5 files under each doc/.

Generation is deterministic for a given N (same names, same relations) and uses bare os-level
calls: doc files are empty (an empty file costs an inode but no data block, which keeps a
million-item tree near 12 GB instead of 24 GB; the index only stats them) and sidecars are a
few hundred bytes. The tree is written under `<name>.tmp` and renamed when complete, so an
interrupted run never leaves a half collection that looks cached.

    python bench/gen.py --items 100000 [--cache DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import sys
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

GEN_VERSION = 2  # bump when the layout changes: cached collections of older versions are rebuilt
MANIFEST = "bench-manifest.json"

HOSTS = (
    "sid.inpe.br",
    "urlib.net",
    "iconet.com.br",
    "dpi.inpe.br",
    "plutao.sid.inpe.br",
    "mtc-m16c.sid.inpe.br",
    "library.example.org",
    "repo.uni-example.de",
)
WORDS = ("mtc-m18", "mtc-m19", "mtc-m21b", "mtc-m18@80", "banon", "lise", "eprints.8080", "col")
YEARS = tuple(range(1998, 2025))
IBIP_PREFIXES = ("8JMKD3MGP8W", "8JMKD3MGP7W", "J8LNKAN8PW", "LK47B6W", "8JMKD3MGPCW")
IBIP_DIGITS = "23456789ABCDEFGHJKLMNPQRSTU"
LANGUAGES = ("pt", "es", "fr", "de", "pt-BR", "it")
FILE_NAMES = (
    "article.pdf",
    "reference.bib",
    "figure.png",
    "data.csv",
    "slides.pdf",
    "Relatório Final.pdf",
    "index.html",
    "appendix.pdf",
)
# An external Archive's items (translations and editions held elsewhere).
EXTERNAL_HOST = "other-archive.example.net"


def default_cache() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "archive-service-bench"


def base27(number: int) -> str:
    digits = []
    while True:
        number, rest = divmod(number, 27)
        digits.append(IBIP_DIGITS[rest])
        if not number:
            return "".join(reversed(digits))


@dataclass
class Item:
    directory: str  # also its IBI (rep or ibip) as written
    sidecar: dict | None = field(default_factory=dict)
    files: tuple[str, ...] = ()
    role: str = "plain"


class Names:
    """Unique repository names: each slot is one minute of one host/word/year directory, so an
    item's metadata can take the seed's `<minute>.<ss>` sibling name without colliding."""

    def __init__(self, rng: random.Random):
        self.rng = rng
        self.dirs = [(h, w, y) for h in HOSTS for w in WORDS for y in YEARS]
        self.used = [0] * len(self.dirs)
        self.ibip_counter = 27**5

    def minute(self) -> tuple[str, datetime]:
        which = self.rng.randrange(len(self.dirs))
        host, word, year = self.dirs[which]
        slot = self.used[which]
        self.used[which] += 1
        # 1009 is prime to 525,000 (minutes in 364.6 days): the first 525,000 slots of a
        # directory are distinct minutes of its year, spread over the whole year.
        moment = datetime(year, 1, 1) + timedelta(minutes=slot * 1009 % 525_000)
        return f"{host}/{word}/{year}", moment

    def rep(self, seconds: bool | None = None) -> tuple[str, str]:
        """A new repository name and the minute stem for its metadata sibling."""
        prefix, moment = self.minute()
        stem = f"{prefix}/{moment:%m.%d.%H.%M}"
        if seconds is None:
            seconds = self.rng.random() < 0.6
        name = f"{stem}.{self.rng.randrange(1, 30):02d}" if seconds else stem
        return name, stem

    def ibip(self) -> str:
        self.ibip_counter += self.rng.randrange(1, 50)
        return f"{self.rng.choice(IBIP_PREFIXES)}/{base27(self.ibip_counter)}"


def _timestamp(rng: random.Random) -> str:
    moment = datetime(2005, 1, 1, tzinfo=UTC) + timedelta(seconds=rng.randrange(600_000_000))
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def _files(rng: random.Random, count: int | None = None) -> tuple[str, ...]:
    count = count or rng.choice((1, 1, 1, 2, 2, 3, 4, 5))
    return tuple(rng.sample(FILE_NAMES, count))


def _data_item(
    rng: random.Random, names: Names, language: str | None = "en", role: str = "plain"
) -> tuple[Item, str]:
    rep, stem = names.rep()
    files = _files(rng)
    side: dict = {}
    if rng.random() < 0.3:
        side["ibip"] = names.ibip()
    if language:
        side["language"] = language
    side["timestamp"] = _timestamp(rng)
    side["target"] = files[0]
    return Item(rep, side, files, role), stem


def _metadata_item(rng: random.Random, stem: str) -> Item:
    rep = f"{stem}.{rng.randrange(30, 60):02d}"
    side = {
        "contenttype": "Metadata",
        "timestamp": _timestamp(rng),
        "target": "metadata.html",
        "formats": {"oai_dc": "oai_dc.xml"},
    }
    return Item(rep, side, ("metadata.html", "oai_dc.xml"), "metadata")


def _external(rng: random.Random) -> str:
    year, month, day = rng.randrange(1990, 2025), rng.randrange(1, 13), rng.randrange(1, 29)
    return f"{EXTERNAL_HOST}/arch/{year}/{month:02d}.{day:02d}.10.00"


def work(rng: random.Random, names: Names) -> list[Item]:
    """One work: a group of related items. Mix chosen so that about 60 % of items are in
    relations (the issue asks for editions chains, translations and metadata items)."""
    roll = rng.random()
    items: list[Item] = []
    if roll < 0.25:  # a 'full' work: edition chain, translations here and elsewhere, metadata
        editions = []
        for _ in range(rng.choice((2, 3, 3))):
            item, stem = _data_item(rng, names)
            meta = _metadata_item(rng, stem)
            item.sidecar["metadata"] = meta.directory
            editions += [item, meta]
        chain = editions[0::2]
        for older, newer in zip(chain, chain[1:]):
            older.sidecar["nextedition"] = newer.directory
        last = chain[-1]
        translations = {}
        for lang in rng.sample(LANGUAGES, 2):
            tr, tr_stem = _data_item(rng, names, lang)
            tr.sidecar["translations"] = {"en": last.directory}
            translations[lang] = tr.directory
            items.append(tr)
            tr_meta = _metadata_item(rng, tr_stem)
            tr.sidecar["metadata"] = tr_meta.directory
            items.append(tr_meta)
        translations[rng.choice(("ja", "zh"))] = _external(rng)
        last.sidecar["translations"] = translations
        chain[0].role = "full"
        items = editions + items
    elif roll < 0.55:  # a document with its metadata item
        item, stem = _data_item(rng, names, rng.choice(("en", "pt")))
        meta = _metadata_item(rng, stem)
        item.sidecar["metadata"] = meta.directory
        items = [item, meta]
    elif roll < 0.70:  # inline Dublin Core
        item, _ = _data_item(rng, names, rng.choice(("en", "pt-BR", None)))
        item.sidecar["dc"] = {
            "title": f"Report {rng.randrange(10**6)}",
            "creator": ["Banon, G.", "Author, A."],
            "date": "2010",
        }
        items = [item]
    elif roll < 0.78:  # no sidecar at all: defaults from the files
        rep, _ = names.rep()
        items = [Item(rep, None, _files(rng), "bare")]
    elif roll < 0.82:  # stored under its IBIp, repository name in the sidecar
        ibip = names.ibip()
        rep, _ = names.rep()
        files = _files(rng, 1)
        items = [
            Item(
                ibip,
                {"rep": rep, "language": "en", "timestamp": _timestamp(rng)},
                files,
                "ibip-dir",
            )
        ]
    elif roll < 0.86:  # next edition held in another Archive
        item, _ = _data_item(rng, names)
        item.sidecar["nextedition"] = _external(rng)
        items = [item]
    elif roll < 0.89:  # Copy
        item, _ = _data_item(rng, names)
        item.sidecar["state"] = "Copy"
        items = [item]
    elif roll < 0.91:  # Deleted: sidecar only
        rep, _ = names.rep()
        items = [Item(rep, {"state": "Deleted", "timestamp": _timestamp(rng)}, (), "deleted")]
    elif roll < 0.93:  # licensed
        item, stem = _data_item(rng, names)
        meta = _metadata_item(rng, stem)
        item.sidecar["metadata"] = meta.directory
        item.sidecar["access"] = {"networks": ["150.163.0.0/16", "2001:12f0::/32"]}
        items = [item, meta]
    else:  # a plain document, the editable kind
        item, _ = _data_item(rng, names, rng.choice(("en", "pt", None)))
        item.role = "editable"
        items = [item]
    return items


def _yaml_scalar(value) -> str:
    if isinstance(value, str) and (
        value[:1].isdigit() or ":" in value or " " in value or not value.isascii()
    ):
        return json.dumps(value, ensure_ascii=False)  # a JSON string is a YAML string
    return str(value)


def render_sidecar(side: dict) -> bytes:
    lines = ["# generated by bench/gen.py"]
    for key, value in side.items():
        if isinstance(value, dict):
            lines.append(f"{key}:")
            for k, v in value.items():
                if isinstance(v, list):
                    lines.append(f"  {k}:")
                    lines += [f"    - {_yaml_scalar(x)}" for x in v]
                else:
                    lines.append(f"  {k}: {_yaml_scalar(v)}")
        else:
            lines.append(f"{key}: {_yaml_scalar(value)}")
    return ("\n".join(lines) + "\n").encode("utf-8")


def plan(count: int) -> list[Item]:
    rng = random.Random(f"archive-service-bench/{GEN_VERSION}/{count}")
    names = Names(rng)
    items: list[Item] = []
    while len(items) < count:
        items += work(rng, names)
    # A cut work keeps references to items never written: they read as held elsewhere.
    return items[:count]


def write(root: Path, items: list[Item]) -> dict:
    made: set[str] = set()
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC
    sidecars = files = 0
    mkdir = os.mkdir
    for item in items:
        parts = item.directory.split("/")
        for depth in range(1, len(parts)):
            parent = "/".join(parts[:depth])
            if parent not in made:
                os.makedirs(root / parent, exist_ok=True)
                made.add(parent)
        path = f"{root}/{item.directory}"
        mkdir(path)
        if item.sidecar is not None:
            fd = os.open(f"{path}/item.yaml", flags, 0o644)
            os.write(fd, render_sidecar(item.sidecar))
            os.close(fd)
            sidecars += 1
        if item.files:
            mkdir(f"{path}/doc")
            for name in item.files:
                os.close(os.open(f"{path}/doc/{name}", flags, 0o644))
                files += 1
    return {"sidecars": sidecars, "files": files}


def collection_path(cache: Path, count: int) -> Path:
    return Path(cache) / f"collection-{count}-v{GEN_VERSION}"


def ensure(count: int, cache: Path | None = None, log=print) -> tuple[Path, dict]:
    """The cached collection of `count` items and its manifest, generating it if needed."""
    cache = Path(cache or default_cache())
    root = collection_path(cache, count)
    manifest_path = root / MANIFEST
    if manifest_path.is_file():
        return root, json.loads(manifest_path.read_text())
    cache.mkdir(parents=True, exist_ok=True)
    tmp = root.with_name(root.name + ".tmp")
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir()
    started = time.perf_counter()
    items = plan(count)
    counts = write(tmp, items)
    rng = random.Random(count)
    full = [i.directory for i in items if i.role == "full"]
    # A full item's chain must be whole: keep those whose last edition carries translations.
    editable = [i for i in items if i.role == "editable"]
    manifest = {
        "version": GEN_VERSION,
        "items": count,
        **counts,
        "full": rng.sample(full, min(len(full), 1000)),
        "editable": [
            {"directory": i.directory, "timestamp": i.sidecar["timestamp"]}
            for i in rng.sample(editable, min(len(editable), 400))
        ],
        "seconds": round(time.perf_counter() - started, 1),
    }
    (tmp / MANIFEST).write_text(json.dumps(manifest, indent=1))
    os.replace(tmp, root)
    log(
        f"generated {count} items ({counts['sidecars']} sidecars, {counts['files']} files) "
        f"in {manifest['seconds']} s at {root}"
    )
    return root, manifest


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, required=True)
    parser.add_argument(
        "--cache",
        type=Path,
        default=None,
        help="cache directory (default: $XDG_CACHE_HOME/archive-service-bench)",
    )
    args = parser.parse_args(argv)
    root, manifest = ensure(args.items, args.cache)
    print(root)
    return 0


if __name__ == "__main__":
    sys.exit(main())
