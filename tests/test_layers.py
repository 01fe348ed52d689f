"""The layout shows the architecture (issue 17, issue 31): protocol/ stands on its own (no
collection, index, web, no Flask or Werkzeug, no storage), the resolver builds on the protocol
and the common layer only, common/ imports nothing of ours, no package of archive_service
imports one that imports it back, and what changes the collection (deposit, mint, import) stands
above the index it updates. web/ imports no database driver, and the stores layer (stores/)
stands on common, protocol and settings. Read from the modules' imports (every `import`, also
inside functions), not from what happens to be loaded."""

from __future__ import annotations

import ast
import functools
from pathlib import Path

import pytest

import archive_service

PACKAGE = Path(archive_service.__file__).parent


# Every module and package of archive_service by its dotted name: read once, not a stat per
# imported name (the whole package's graph is read in one test).
OURS = {
    ".".join(f.relative_to(PACKAGE.parent).with_suffix("").parts)
    for f in PACKAGE.rglob("*.py")
    if f.name != "__init__.py"
} | {".".join(d.relative_to(PACKAGE.parent).parts) for d in PACKAGE.rglob("*") if d.is_dir()}


@functools.cache
def imports_of(path: Path) -> frozenset[str]:
    """The absolute names `path` imports; `from . import x` names the module `x` where it is
    one, so `from .. import settings` reads as archive_service.settings."""
    module = ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if path.name == "__init__.py":
        module = module.rsplit(".", 1)[0] + ".__init__"
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.rsplit(".", node.level)[0]
                name = f"{base}.{node.module}" if node.module else base
            else:
                name = node.module
            for alias in node.names:
                sub = f"{name}.{alias.name}"
                found.add(sub if sub in OURS else name)
    return frozenset(found)


def under(name: str, prefixes: tuple[str, ...]) -> bool:
    return any(name == p or name.startswith(p + ".") for p in prefixes)


def modules(folder: str) -> list[Path]:
    return sorted((PACKAGE / folder).glob("*.py"))


def test_imports_of_reads_relative_imports_as_absolute_names():
    found = imports_of(PACKAGE / "resolver" / "registry.py")
    assert "archive_service.settings" in found
    assert "archive_service.protocol.ibi" in found
    # From a package's __init__ and from a module two packages down.
    stores = PACKAGE / "resolver" / "stores" / "registry"
    assert "archive_service.resolver.config" in imports_of(stores / "__init__.py")
    assert "archive_service.common.db" in imports_of(stores / "sqlite.py")


@pytest.mark.parametrize("path", modules("protocol"), ids=lambda p: p.name)
def test_protocol_imports_no_collection_index_or_web(path: Path):
    forbidden = (
        "archive_service.collection",
        "archive_service.index",
        "archive_service.indexer",
        "archive_service.web",
        "archive_service.serve",
        "archive_service.cli",
        "archive_service.resolver",
        "archive_service.stores",
        "flask",
        "werkzeug",
    )
    wrong = sorted(name for name in imports_of(path) if under(name, forbidden))
    assert not wrong, f"protocol/{path.name} imports {wrong}"


# Storage: the drivers and our ways of opening them. Only the stores layer (stores/), the
# index and the resolver's own stores use them (issue 31).
STORAGE = (
    "sqlite3",
    "psycopg",
    "psycopg_pool",
    "archive_service.common.db",
    "archive_service.common.postgres",
)


@pytest.mark.parametrize("path", modules("protocol"), ids=lambda p: p.name)
def test_protocol_imports_no_storage(path: Path):
    wrong = sorted(name for name in imports_of(path) if under(name, STORAGE))
    assert not wrong, f"protocol/{path.name} imports {wrong}: its state belongs in stores/"


@pytest.mark.parametrize("path", modules("web"), ids=lambda p: p.name)
def test_web_holds_no_sql(path: Path):
    """web/ is WSGI: what it keeps goes through a store (stores/), never a driver of its own."""
    wrong = sorted(name for name in imports_of(path) if under(name, STORAGE))
    assert not wrong, f"web/{path.name} imports {wrong}: its storage belongs in stores/"


def test_the_stores_stand_on_common_protocol_and_settings_only():
    allowed = (
        "archive_service.common",
        "archive_service.protocol",
        "archive_service.settings",
        "archive_service.stores",
    )
    for path in sorted((PACKAGE / "stores").rglob("*.py")):
        ours = [n for n in imports_of(path) if under(n, ("archive_service",))]
        wrong = sorted(n for n in ours if not under(n, allowed))
        assert not wrong, f"{path.relative_to(PACKAGE)} imports {wrong}"


# Its stores too (resolver/stores/): they live under the resolver so that it keeps to this rule.
@pytest.mark.parametrize(
    "path",
    sorted((PACKAGE / "resolver").rglob("*.py")),
    ids=lambda p: str(p.relative_to(PACKAGE / "resolver")),
)
def test_resolver_imports_only_the_protocol_and_the_common_layer(path: Path):
    allowed = (
        "archive_service.protocol",
        "archive_service.common",
        "archive_service.resolver",
        "archive_service.settings",  # the settings table and its public validators
        "archive_service.http_errors",  # the protocol's error as a Flask response, both apps'
        "archive_service",  # __version__ (archive_service/__init__.py)
    )
    ours = [n for n in imports_of(path) if under(n, ("archive_service",))]
    wrong = sorted(n for n in ours if not under(n, allowed[:-1]) and n != "archive_service")
    assert not wrong, f"resolver/{path.relative_to(PACKAGE / 'resolver')} imports {wrong}"


def layer_of(name: str) -> str | None:
    """The package (or top-level module) of archive_service that `name` is in: `index` for
    archive_service.index.store, `settings` for archive_service.settings; None for the
    package itself and for names outside it."""
    parts = name.split(".")
    if parts[0] != "archive_service" or len(parts) < 2 or parts[1] == "__init__":
        return None
    return parts[1]


@functools.lru_cache(maxsize=1)
def package_graph() -> dict[str, dict[str, list[str]]]:
    """package -> the packages it imports -> the modules (relative paths) that import them."""
    graph: dict[str, dict[str, list[str]]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        source = layer_of(".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts))
        if source is None:
            continue
        for name in imports_of(path):
            target = layer_of(name)
            if target is not None and target != source:
                by = graph.setdefault(source, {}).setdefault(target, [])
                by.append(str(path.relative_to(PACKAGE)))
    return graph


def cycles(graph: dict[str, dict[str, list[str]]]) -> list[list[str]]:
    """Every strongly connected set of more than one package (Tarjan's), each sorted: a
    package that imports, directly or through others, one that imports it back."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in graph.get(node, {}):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_cycles_finds_a_back_import_through_a_third_package():
    graph = {"a": {"b": ["a/x.py"]}, "b": {"c": ["b/y.py"]}, "c": {"a": ["c/z.py"]}, "d": {}}
    assert cycles(graph) == [["a", "b", "c"]]
    assert cycles({"a": {"b": ["a/x.py"]}, "b": {}}) == []


def test_no_package_imports_one_that_imports_it_back():
    graph = package_graph()
    found = cycles(graph)
    detail = [
        f"{a} -> {b} ({', '.join(sorted(set(graph[a][b])))})"
        for group in found
        for a in group
        for b in graph.get(a, {})
        if b in group
    ]
    assert not found, f"package cycles {found}: {detail}"


def test_common_imports_nothing_of_ours():
    wrong = {
        str(path.relative_to(PACKAGE)): sorted(
            n for n in imports_of(path) if layer_of(n) not in (None, "common")
        )
        for path in sorted((PACKAGE / "common").rglob("*.py"))
    }
    wrong = {module: names for module, names in wrong.items() if names}
    assert not wrong, f"common/ imports archive_service's own packages: {wrong}"


def test_deposit_mint_and_import_stand_above_the_index():
    graph = package_graph()
    changers = ("deposit", "imports")
    for below in ("index", "collection", "common", "protocol", "indexer"):
        wrong = sorted(c for c in changers if below in graph and c in graph[below])
        assert not wrong, f"{below} imports {wrong}, which change the collection above it"
    assert (PACKAGE / "deposit" / "mint.py").is_file(), "mint is deposit's (deposit/mint.py)"
    assert not (PACKAGE / "collection" / "deposit.py").exists()
    assert "index" in graph["deposit"], "deposit updates the index: it stands above it"


# The service path answers without a web framework (issue 35): contrib's CGI program imports
# these, and Flask only for a page (tests/test_cgi_lean.py checks what a request loads).
FRAMEWORKS = ("flask", "flask_babel", "werkzeug", "jinja2")
SERVICE_PATH = (
    "web/__init__.py",
    "web/core.py",
    "web/service.py",
    "web/cgi.py",
    "web/metrics.py",
    "common/limits.py",
)


@pytest.mark.parametrize("name", SERVICE_PATH)
def test_the_service_path_imports_no_web_framework(name: str):
    path = PACKAGE / name
    wrong = sorted(n for n in imports_of(path) if under(n, FRAMEWORKS))
    assert not wrong, f"{name} imports {wrong}: a CGI protocol request would load them"


# A /col/ file under CGI: Werkzeug's HTTP, not the app (tests/test_cgi_download.py checks what
# such a request loads: web/headers.py too, whose Flask is its `install`'s alone).
DOWNLOAD_PATH = ("web/download.py", "web/signposting.py", "citations/work.py")
APP_FRAMEWORKS = ("flask", "flask_babel", "jinja2")


@pytest.mark.parametrize("name", DOWNLOAD_PATH)
def test_the_download_path_imports_no_app_framework(name: str):
    wrong = sorted(n for n in imports_of(PACKAGE / name) if under(n, APP_FRAMEWORKS))
    assert not wrong, f"{name} imports {wrong}: a CGI download would load them"
