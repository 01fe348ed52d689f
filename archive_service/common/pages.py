"""The HTML pages of both apps (the Archive's and the resolver's): Jinja templates shipped in
the package around one layout, `common/templates/base.html`.

They are read with the module's code and compiled once when an app is made: under gunicorn the
workers inherit them from the master, no request reads a template file (a worker whose user
cannot read the package's files still answers), and a missing template stops the start
instead of failing a request."""

from __future__ import annotations

from pathlib import Path

from flask import Flask
from jinja2 import DictLoader

LAYOUT = "base.html"


def sources(directory: Path, pages: tuple[str, ...]) -> dict[str, str]:
    """The templates `pages` of `directory`, with the shared layout, by name."""
    found = {LAYOUT: (Path(__file__).with_name("templates") / LAYOUT).read_text(encoding="utf-8")}
    found.update({page: (directory / page).read_text(encoding="utf-8") for page in pages})
    return found


def install(app: Flask, templates: dict[str, str]) -> None:
    """Serve `app`'s pages from `templates` (see `sources`), each compiled now."""
    app.jinja_loader = DictLoader(templates)
    for name in templates:
        app.jinja_env.get_template(name)
