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


def install(app: Flask, templates: dict[str, str], *, compile_now: bool = True) -> None:
    """Serve `app`'s pages from `templates` (see `sources`), each compiled now, or when first
    rendered (`compile_now=False`: a CGI process, made for one request, compiles the page it
    renders, if any, not all of them: 0.1 s)."""
    app.jinja_loader = DictLoader(templates)
    # Every page's text goes through gettext (`_()`); null translations until a catalogue
    # of messages is installed (issue 32 point 7).
    app.jinja_env.add_extension("jinja2.ext.i18n")
    app.jinja_env.install_null_translations(newstyle=True)
    if compile_now:
        for name in templates:
            app.jinja_env.get_template(name)
