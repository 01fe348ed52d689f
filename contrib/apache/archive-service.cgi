#!/opt/archive-service/venv/bin/python3
"""CGI entry point: the app (archive_service.web) through wsgiref's CGIHandler.

Install as /usr/lib/cgi-bin/archive-service.cgi (mode 0755), the first line naming the Python
of the venv where archive-service is installed. Settings: ARCHIVE_SERVICE_CONFIG (SetEnv).
"""

from wsgiref.handlers import CGIHandler

from archive_service.web import create_app_from_env

CGIHandler().run(create_app_from_env())
