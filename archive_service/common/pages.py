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

from . import i18n

LAYOUT = "base.html"
ERROR = "error.html"  # an HTTP error's page (http_errors.py), in both apps


def sources(directory: Path, pages: tuple[str, ...]) -> dict[str, str]:
    """The templates `pages` of `directory`, with the shared layout and error page, by name."""
    shared = Path(__file__).with_name("templates")
    found = {name: (shared / name).read_text(encoding="utf-8") for name in (LAYOUT, ERROR)}
    found.update({page: (directory / page).read_text(encoding="utf-8") for page in pages})
    return found


def install(
    app: Flask,
    templates: dict[str, str],
    *,
    compile_now: bool = True,
    home: str | None = None,
    foreign: tuple[str, ...] = (),
) -> None:
    """Serve `app`'s pages from `templates` (see `sources`), in the request's language
    (`common/i18n.py`; `home`, `foreign`: where its switch links), each compiled now, or when
    first rendered (`compile_now=False`: a CGI process, made for one request, compiles the
    page it renders, if any, not all of them: 0.1 s)."""
    i18n.install(app, home, foreign)  # first: it adds Jinja's i18n extension
    app.jinja_loader = DictLoader(templates)
    if compile_now:
        for name in templates:
            app.jinja_env.get_template(name)
