"""mod_wsgi entry point: the same app as `archive-service serve` (archive_service.web).

Settings come from the file named by ARCHIVE_SERVICE_CONFIG (default below) and from
ARCHIVE_SERVICE_<KEY> variables of the process environment; Apache's SetEnv does not reach
os.environ under mod_wsgi, so set the path here if it differs.
The app answers from the index as it stands (refresh=False: a daemon process starts without
walking the collection); archive-service-indexer.service (or archive-service-index.timer) keeps
it current, see ../systemd/README.md. With no index yet, requests answer 503 until one is built.
"""

import os
import sys

os.environ.setdefault("ARCHIVE_SERVICE_CONFIG", "/etc/archive-service/archive-service.yaml")

from archive_service.settings import ConfigError  # noqa: E402
from archive_service.web import create_app_from_env  # noqa: E402

try:
    application = create_app_from_env(refresh=False)
except ConfigError as exc:
    # As the .cgi file: the reason in Apache's error log, not a traceback there at every
    # request (mod_wsgi imports a failed script file again for each one); the client gets a
    # 500. Fix the settings, then reload Apache.
    print(f"archive-service.wsgi: {exc}", file=sys.stderr)

    def application(environ, start_response):
        start_response("500 Internal Server Error", [("Content-Type", "text/plain; charset=utf-8")])
        return [b"The Archive's settings cannot be read: see the web server's error log.\n"]
