"""contrib's CGI program (contrib/apache/archive-service.cgi): one request per process.

A protocol request (GET or HEAD at the service path, with a query) is answered by the service
path of create_app's app alone (web/service.py's `Service`, `ServiceEndpoint` and mount rule
over web/core.py's `Core`), so that the process imports neither Flask, Jinja nor Werkzeug:
they were more than half of such a request's time (issue 35). Any other request (pages,
/col/, /health, /metrics), and every request while there is no complete index (create_app's
503), goes to the app create_app makes, Flask imported only then.
"""

from __future__ import annotations

from .. import settings
from ..indexer.startup import LiveIndex
from .core import REQUIRED, Core, settings_from_env
from .service import ArchiveRoot, Service, ServiceEndpoint


class _Deferred:
    """WSGI app: create_app's app, made (Flask imported) by the first request that needs it."""

    def __init__(self, config: settings.Config):
        self.config = config

    def __call__(self, environ, start_response):
        from .app import create_app

        # As create_app_from_env under CGI: the index as it stands, no indexer followed.
        return create_app(self.config, refresh=False)(environ, start_response)


class _OneService:
    """`Service.answer`, the Service made for the request that asks (none for a page)."""

    def __init__(self, config: settings.Config, live: LiveIndex):
        self.config = config
        self.live = live

    def __call__(self, environ) -> tuple[int, bytes]:
        return Service(Core.open(self.config, self.live), one_request=True).answer(environ)


def cgi_app(config: settings.Config):
    """The WSGI app of one CGI request with settings `config` (ConfigError as create_app)."""
    config.require(*REQUIRED)
    whole = _Deferred(config)
    live = LiveIndex(config)
    if not live.store.is_complete():
        return whole
    path = "/" + config.archiveserviceibi
    # Not metered (web/metrics.py), unlike create_app's app: a CGI process's counters die with
    # it, no scrape ever reads them (docs/metrics.md), and counting imported prometheus_client
    # and cost a tenth of a protocol request's CPU. /metrics, pages and files go to `whole`.
    return ArchiveRoot(ServiceEndpoint(whole, path, _OneService(config, live)), (path, "/col"))


def cgi_app_from_env():
    """contrib's .cgi file: settings as create_app_from_env reads them."""
    return cgi_app(settings_from_env())
