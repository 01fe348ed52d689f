#!/opt/archive-service/venv/bin/python3
"""CGI entry point: the app (archive_service.web) through wsgiref's CGIHandler.

Install as /usr/lib/cgi-bin/archive-service.cgi (mode 0755), the first line naming the Python
of the venv where archive-service is installed. Settings: ARCHIVE_SERVICE_CONFIG (SetEnv).
The app answers from the index as it stands (refresh=False: no request walks the collection);
archive-service-indexer.service (or archive-service-index.timer) keeps it current, see
../systemd/README.md. With no index yet, every request answers 503.
A protocol request (urlRequest, acknowledgment, inclusionConfirmationRequest) and a /col/
file are answered without importing Flask (archive_service/web/cgi.py); pages by the whole app.
"""

import sys
from wsgiref.handlers import CGIHandler

from archive_service.settings import ConfigError
from archive_service.web.cgi import cgi_app_from_env

try:
    app = cgi_app_from_env()
except ConfigError as exc:
    # One line in Apache's error log (the settings www-data cannot read, a missing one), not
    # a traceback for every request; the client gets a 500.
    print(f"archive-service.cgi: {exc}", file=sys.stderr)
    sys.stdout.write(
        "Status: 500 Internal Server Error\r\nContent-Type: text/plain; charset=utf-8\r\n\r\n"
        "The Archive's settings cannot be read: see the web server's error log.\n"
    )
    sys.exit(0)
CGIHandler().run(app)
