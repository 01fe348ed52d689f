"""contrib's CGI program (contrib/apache/archive-service.cgi): one request per process.

A protocol request (GET or HEAD at the service path, with a query) is answered by the service
path of create_app's app alone (web/service.py's `Service`, `ServiceEndpoint` and mount rule
over web/core.py's `Core`), so that the process imports neither Flask, Jinja nor Werkzeug:
they were more than half of such a request's time (issue 35). A file under /col/ (GET or HEAD,
no query) is sent by web/download.py, the code of create_app's `col` route, with Werkzeug's
HTTP but neither Flask, Jinja nor Flask-Babel (`_OneFile`). Any other request (pages, /health,
/metrics), a file whose answer needs the whole app (403, 404, 412, 416: their pages; a
query: its checks and the language cookie), and every
request while there is no complete index (create_app's 503), goes to the app create_app
makes, Flask imported only then.
"""

from __future__ import annotations

from .. import settings
from ..common import limits, metrics
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


class _OneFile:
    """WSGI app: a /col/ file sent by web/download.py (the `col` route's code) with the
    headers create_app's app gives it; any other request, and a file whose answer needs more
    of that app, goes on to `whole` before anything is sent or counted."""

    def __init__(self, whole, config: settings.Config, live: LiveIndex):
        self.whole = whole
        self.config = config
        self.live = live

    def __call__(self, environ, start_response):
        if self.takes(environ):
            response = self.answer(environ)
            if response is not None:
                return response(environ, start_response)
        return self.whole(environ, start_response)

    @staticmethod
    def takes(environ) -> bool:
        return (
            environ.get("REQUEST_METHOD") in ("GET", "HEAD")
            and environ.get("PATH_INFO", "").startswith("/col/")
            # A query: create_app's app checks its bytes and sets the `lang` cookie from it.
            and not environ.get("QUERY_STRING")
            and not limits.problem(environ)  # its 400 is a page
        )

    def answer(self, environ):
        """The file's response, or None when the whole app must answer (its page)."""
        from . import download, headers

        core = Core.open(self.config, self.live)
        core.catalog.begin()  # one snapshot of the index, as create_app's requests
        try:
            found = download.locate(core, environ)
            if found is None:
                return None
            response = download.answer(core, environ, *found)
        except download.PAGES:
            return None
        finally:
            core.catalog.end()
        if response.status_code >= 400:  # 412: a page's headers; no use was counted
            response.close()
            return None
        headers.secure(response, file=True)
        return response


def cgi_app(config: settings.Config):
    """The WSGI app of one CGI request with settings `config` (ConfigError as create_app)."""
    config.require(*REQUIRED)
    metrics.count_nothing()
    whole = _Deferred(config)
    live = LiveIndex(config)
    if not live.store.is_complete():
        return whole
    path = "/" + config.archiveserviceibi
    # Not metered (web/metrics.py), unlike create_app's app: a CGI process's counters die with
    # it, no scrape ever reads them (docs/metrics.md), and counting imported prometheus_client
    # and cost a tenth of a protocol request's CPU. /metrics and pages go to `whole`; the
    # statistics store's count of the uses it records (a download's) is none either.
    files = _OneFile(whole, config, live)
    return ArchiveRoot(ServiceEndpoint(files, path, _OneService(config, live)), (path, "/col"))


def cgi_app_from_env():
    """contrib's .cgi file: settings as create_app_from_env reads them."""
    return cgi_app(settings_from_env())
