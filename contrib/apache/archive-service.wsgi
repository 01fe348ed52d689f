"""mod_wsgi entry point: the same app as `archive-service serve` (archive_service.web).

Settings come from the file named by ARCHIVE_SERVICE_CONFIG (default below) and from
ARCHIVE_SERVICE_<KEY> variables of the process environment; Apache's SetEnv does not reach
os.environ under mod_wsgi, so set the path here if it differs.
The app answers from the index as it stands (refresh=False: a daemon process starts without
walking the collection); archive-service-indexer.service (or archive-service-index.timer) keeps
it current, see ../systemd/README.md. With no index yet, requests answer 503 until one is built.
"""

import os

os.environ.setdefault("ARCHIVE_SERVICE_CONFIG", "/etc/archive-service/archive-service.yaml")

from archive_service.web import create_app_from_env  # noqa: E402

application = create_app_from_env(refresh=False)
