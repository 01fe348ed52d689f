"""The file-list and metadata pages come from Jinja templates shipped in the package
(archive_service/web/templates/, compiled once and cached by Flask), not from strings compiled on
every request; and they are pages a phone can read: a language, a viewport, a title, one heading,
a table with a caption and column headers."""

from __future__ import annotations

import fnmatch
import tomllib
from importlib import resources

import pytest
from flask import template_rendered

from archive_service.web import create_app
from support import ROOT, SERVICE, Client

OPEN = "iconet.com.br/banon/2009/09.09.22.01"
PRIVATE = "iconet.com.br/banon/2011/06.14.16.40"
WITH_DC = "iconet.com.br/banon/2012/03.05.08.15"
PAGES = {
    "filelist.html": (f"/{SERVICE}/filelist/{OPEN}", 200),
    "metadata.html": (f"/{SERVICE}/metadata/{WITH_DC}", 200),
}


def rendered(app, path, status):
    """The page at `path` and the names of the templates Flask rendered for it."""
    names = []

    def record(sender, template, context, **extra):
        names.append(template.name)

    with template_rendered.connected_to(record, app):
        page = Client(app, "").get(path, status=status)
    return page, names


@pytest.mark.parametrize("name", sorted(PAGES))
def test_the_page_renders_from_the_packaged_template(settings, name):
    assert (resources.files("archive_service.web") / "templates" / name).is_file()
    app = create_app(settings)
    page, names = rendered(app, *PAGES[name])
    assert names == [name]  # a string template would have no name
    assert page.content_type == "text/html" and page.charset == "utf-8"


def test_the_package_data_ships_every_template():
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    patterns = declared["tool"]["setuptools"]["package-data"]["archive_service.web"]
    templates = resources.files("archive_service.web") / "templates"
    for entry in templates.iterdir():
        relative = f"templates/{entry.name}"
        assert any(fnmatch.fnmatch(relative, p) for p in patterns), relative


@pytest.mark.parametrize(
    "path, status",
    [PAGES["filelist.html"], (f"/{SERVICE}/filelist/{PRIVATE}", 403), PAGES["metadata.html"]],
)
def test_the_pages_are_readable_on_a_phone(settings, path, status):
    page = Client(create_app(settings), "").get(path, status=status)
    html = page.html
    assert html.html["lang"] == "en"
    viewport = html.find("meta", attrs={"name": "viewport"})
    assert viewport is not None and "width=device-width" in viewport["content"]
    assert html.title.string.strip()
    assert len(html.find_all("h1")) == 1


def test_the_file_list_is_a_captioned_table_with_column_headers(settings):
    page = Client(create_app(settings), "").get(PAGES["filelist.html"][0])
    table = page.html.find("table")
    assert table.caption is not None and table.caption.get_text(strip=True)
    headers = [th.get_text(strip=True) for th in table.thead.find_all("th")]
    assert headers == ["File", "Size"]
    assert all(th.get("scope") == "col" for th in table.thead.find_all("th"))
    for row in table.tbody.find_all("tr"):
        assert row.th is not None and row.th.get("scope") == "row"  # the file names each row
