"""The WSGI application: the Archive service, its file lists and metadata pages, and /col/.

`create_app(config)` builds every app (imported by the package `archive_service.web` when asked
for): `archive-service serve`, a gunicorn command line
(`gunicorn 'archive_service.web:create_app_from_env()'`) and mod_wsgi get the same one.
Paths are relative to the WSGI mount point (SCRIPT_NAME); absolute URLs handed to the
resolver are built from `archiveaddress`, never from the request's Host header.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from flask import Flask
from flask.logging import default_handler

from .. import settings
from ..common import limits
from ..common import pages as common_pages
from ..common.net import persistent_url  # noqa: F401  (the CLI's, from here)
from ..http_errors import TEXT, answer_unexpected_errors
from ..indexer.startup import LiveIndex
from ..oai.records import oai_dc_xml  # noqa: F401  (tests', from here)
from . import (
    counter_api,
    files,
    headers,
    health,
    landing,
    metrics,
    page_limit,
    pages,
    sitemaps,
)
from .core import REQUIRED, settings_from_env
from .oai import oai_blueprint, oai_provider
from .service import ArchiveRoot, Service, ServiceEndpoint
from .site import Site

log = logging.getLogger(__name__)

PAGES = (
    "filelist.html",
    "metadata.html",
    "service.html",
    "items.html",
    "statistics.html",
    "landing.html",
)
# Read with the module's code (see common/pages.py): an app made later by a process that can no
# longer read the package's files (privileges dropped, a tree only its installer reads) still
# has its pages.
PAGE_SOURCES = common_pages.sources(Path(__file__).with_name("templates"), PAGES)
__all__ = ["ArchiveRoot", "ServiceEndpoint", "create_app", "create_app_from_env"]


class _Following:
    """WSGI middleware: make sure the collection's indexer runs, from the first request on
    (after any fork), before every request (a cheap check once it runs)."""

    def __init__(self, app, live: LiveIndex):
        self.app = app
        self.live = live

    def __call__(self, environ, start_response):
        self.live.follow()
        return self.app(environ, start_response)


class _NotIndexed:
    """WSGI app of an Archive whose collection has no index yet, where the app must not build
    one (CGI, mod_wsgi): 503 and one line saying what to run, until the index is complete;
    then the Archive itself (a mod_wsgi daemon lives on after `archive-service index`)."""

    BODY = b"The Archive's index is not built yet: run archive-service index\n"

    def __init__(self, live: LiveIndex, build: Callable[[], Flask]):
        self.live = live
        self.build = build
        self.app: Flask | None = None
        self.lock = threading.Lock()

    def __call__(self, environ, start_response):
        if self.app is None and self.live.store.is_complete():
            with self.lock:
                if self.app is None:
                    self.app = self.build()
        if self.app is not None:
            return self.app(environ, start_response)
        log.error(
            "no index of the collection %s in %s yet: run archive-service index",
            self.live.config.collection,
            self.live.store.state_dir,
        )
        start_response(
            "503 Service Unavailable",
            [("Content-Type", TEXT), ("Content-Length", str(len(self.BODY)))],
        )
        return [] if environ.get("REQUEST_METHOD") == "HEAD" else [self.BODY]


def create_app(config: settings.Config | Mapping[str, Any], *, refresh: bool = True) -> Flask:
    """Build the WSGI app for one Archive from validated settings (or a mapping of them).

    `refresh`: bring the index up to date with the collection first (a walk of it; `serve`).
    False where processes are short-lived or started by a request (CGI, mod_wsgi): the app
    answers from the index as it stands, which `archive-service index --watch` (or `index`
    from a timer) keeps current, and answers 503 while there is no complete index."""
    if not isinstance(config, settings.Config):
        config = settings.load(options=dict(config), environ={})
    config.require(*REQUIRED)

    app = Flask(__name__)
    # Werkzeug would answer `//` with a redirect to a URL built from the Host header.
    app.url_map.merge_slashes = False
    # Log through the root logger (gunicorn's or the CLI's), not into wsgi.errors.
    app.logger.removeHandler(default_handler)
    app.config["ARCHIVE_SERVICE"] = config
    app.config["MAX_CONTENT_LENGTH"] = limits.MAX_BODY

    # The persistent index: re-read what changed since it was last brought up to date.
    # Following later changes starts after forking (serve's workers, create_app_from_env),
    # or when the embedding code calls app.extensions["archive_index"].follow().
    live = LiveIndex(config)
    app.extensions["archive_index"] = live
    if refresh:
        live.refresh()
        for problem in live.catalog.problems:
            log.warning("%s", problem)
        log.info("indexed %d items from %s", live.catalog.count(), config.collection)
    elif not live.store.is_complete():
        app.wsgi_app = _NotIndexed(live, lambda: create_app(config, refresh=False))
        return app
    catalog = live.catalog
    catalog.close()  # nothing open in this process if it forks workers next
    site = Site.open(config, live)
    app.extensions["archive"] = site.archive
    app.extensions["stats"] = site.store
    # Each request reads one snapshot of the index: never half of an indexer's commit.
    app.teardown_request(lambda exc: catalog.end())
    app.before_request(site.start_request)
    common_pages.install(app, PAGE_SOURCES, compile_now=refresh, home="pages.about")
    headers.install(app, files_endpoint="files.col", scripts=(landing.COPY_SCRIPT,))

    service = Service(site)
    app.register_blueprint(pages.service_blueprint(site, service.answer))
    app.register_blueprint(pages.blueprint(site))
    app.register_blueprint(files.blueprint(site))
    app.register_blueprint(counter_api.blueprint(site))
    app.register_blueprint(health.blueprint(site))
    provider = oai_provider(config, catalog, site.keys)
    app.register_blueprint(oai_blueprint(provider, site.service_path, site.links))
    context = landing.Context(catalog, config.resolver, site.links, site.used, site.licensed)
    app.register_blueprint(landing.blueprint(context), url_prefix=site.service_path)
    app.register_blueprint(sitemaps.blueprint(catalog, site.links, site.service_path))
    answer_unexpected_errors(app, log)

    pages_bounded = page_limit.of_archive(app.wsgi_app, config, site.service_path)
    served = ServiceEndpoint(pages_bounded, site.service_path, service.answer)
    served = metrics.metered(
        served, config, site.service_path, lambda: health.of_site(site), catalog
    )
    app.wsgi_app = ArchiveRoot(served, (site.service_path, "/col"))
    return app


def create_app_from_env(*, refresh: bool = True) -> Flask:
    """For gunicorn, mod_wsgi and CGI: settings from ARCHIVE_SERVICE_CONFIG and the
    environment; `refresh` as for create_app (contrib's .cgi and .wsgi files pass False).

    The serving process follows the collection from its first request on (with gunicorn's
    --preload the app is made in the master, where no thread may start before the fork)."""
    app = create_app(settings_from_env(), refresh=refresh)
    # A CGI process lives for one request: it reads the index as create_app left it.
    if not os.environ.get("GATEWAY_INTERFACE", "").startswith("CGI/"):
        app.wsgi_app = _Following(app.wsgi_app, app.extensions["archive_index"])
    return app
