"""The WSGI application: the Archive service, its file lists and metadata pages, and /col/.

`create_app(config)` (web/app.py) builds every app: `archive-service serve`, a gunicorn command
line (`gunicorn 'archive_service.web:create_app_from_env()'`), mod_wsgi and CGI get the same one.

The package imports no web framework itself: its Flask app is imported when first asked for
(`archive_service.web.create_app`), so that a CGI process answering the protocol
(web/cgi.py) imports neither Flask, Jinja nor Werkzeug.
"""

from __future__ import annotations

from importlib import import_module
from importlib.util import find_spec


def __getattr__(name: str):
    # A submodule's name is no attribute here until imported: the import system then imports
    # that module alone (`from archive_service.web import stats`), not the app.
    if name.startswith("__") or find_spec(f"{__name__}.{name}") is not None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(import_module(".app", __name__), name)
