"""The resolver's WSGI application: its own service (inclusion, exclusion) and persistent URLs.

`create_resolver_app(config)` builds it for `archive-service resolver serve`, for gunicorn
(`gunicorn 'archive_service.resolver.app:create_resolver_app_from_env()'`) and for tests.
The service answers at `/<resolveribi>`; every other path is a persistent URL.
"""

from __future__ import annotations

import ipaddress
import logging
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from flask import Flask
from flask.logging import default_handler

from .. import settings
from ..common import limits, pages
from ..http_errors import answer_unexpected_errors
from . import config as rconfig
from . import metrics, routes
from .acknowledgments import Acknowledgments
from .answered import Answered
from .archives import ArchiveClient
from .conflicts import Conflicts
from .loops import OwnAddress
from .redirects import RedirectEndpoint, Resolutions, client_ips
from .registry import Registry

log = logging.getLogger(__name__)

__all__ = ["client_ips", "create_resolver_app", "create_resolver_app_from_env"]

# resolver/templates/, around the layout all the kit's pages share (see common/pages.py).
PAGE_SOURCES = pages.sources(Path(__file__).with_name("templates"), ("alert.html", "home.html"))


def create_resolver_app(config: settings.Config | Mapping[str, Any]) -> Flask:
    """Build the resolver app from validated settings (or a mapping of them): only wiring;
    the routes are resolver/routes.py's."""
    if not isinstance(config, settings.Config):
        config = rconfig.load(options=dict(config), environ={})
    config.require("state_dir")

    app = Flask(__name__)
    app.logger.removeHandler(default_handler)
    app.url_map.merge_slashes = False  # the path after the IBI is the item's, kept as is
    app.config["RESOLVER"] = config
    registry = Registry(config.state_dir, config.database)
    client = ArchiveClient(
        config.timeout, pool_size=max(32, 4 * config.threads), connections=config.threads
    )
    acknowledgments = Acknowledgments(client, config.ack_queue)
    answered = Answered(config.answered_ttl, config.database, config.state_dir)
    conflicts = Conflicts()
    app.extensions["resolver"] = {
        "conflicts": conflicts,
        "registry": registry,
        "client": client,
        "acknowledgments": acknowledgments,
        "answered": answered,
    }
    # The switch of an alert links home: a persistent URL's query is the item's.
    pages.install(app, PAGE_SOURCES, home="pages.home", foreign=("pages.persistent",))
    bind = config.bind if not config.bind.startswith("unix:") else "localhost"
    address = config.address or bind
    trusted = tuple(ipaddress.ip_network(n) for n in config.trusted_proxies)
    resolutions = Resolutions(
        config, registry, client, answered, conflicts, acknowledgments, address, trusted
    )
    parts = routes.Parts(
        config,
        registry,
        client,
        acknowledgments,
        answered,
        conflicts,
        resolutions,
        address,
        trusted,
        OwnAddress(config.bind, config.address),
    )
    app.register_blueprint(routes.service_blueprint(parts))
    app.register_blueprint(routes.pages_blueprint(parts))
    answer_unexpected_errors(app, log)
    app.wsgi_app = RedirectEndpoint(
        app.wsgi_app, resolutions, ("/", "/health", parts.service_path), client.pseudonym
    )
    # Before anything reads a header: gunicorn joins 100 fields of one name into one value.
    app.wsgi_app = limits.RefusingOversized(app.wsgi_app)
    app.wsgi_app = metrics.metered(app.wsgi_app, config, parts.service_path, registry)
    return app


def create_resolver_app_from_env() -> Flask:
    """For gunicorn: settings from ARCHIVE_SERVICE_RESOLVER_CONFIG and the environment."""
    return create_resolver_app(rconfig.load(os.environ.get("ARCHIVE_SERVICE_RESOLVER_CONFIG")))
