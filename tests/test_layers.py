"""The layout shows the architecture (issue 17): protocol/ stands on its own (no collection,
index, web, no Flask or Werkzeug), and the resolver builds on the protocol and the common layer
only. Since issue 31: protocol/ imports no storage, web/ no database driver, and the stores
layer (stores/) stands on common, protocol and settings. Read from the modules' imports
(every `import`, also inside functions), not from what happens to be loaded."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import archive_service

PACKAGE = Path(archive_service.__file__).parent


def imports_of(path: Path) -> set[str]:
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
                is_module = (PACKAGE.parent / sub.replace(".", "/")).with_suffix(".py").is_file()
                is_package = (PACKAGE.parent / sub.replace(".", "/")).is_dir()
                found.add(sub if is_module or is_package else name)
    return found


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
        "archive_service",  # __version__ (archive_service/__init__.py)
    )
    ours = [n for n in imports_of(path) if under(n, ("archive_service",))]
    wrong = sorted(n for n in ours if not under(n, allowed[:-1]) and n != "archive_service")
    assert not wrong, f"resolver/{path.relative_to(PACKAGE / 'resolver')} imports {wrong}"
