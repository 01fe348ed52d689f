"""Size limits on requests, applied twice: by gunicorn (serve/runner.py) and by the app itself
(the Archive's every request; the resolver's header fields, `RefusingOversized`).

gunicorn refuses oversized requests before the app sees them (414 for the request line,
431 for header fields, with its own small HTML page). Under mod_wsgi, CGI or another WSGI
server the app checks again and answers 400 with an `error {…}` pairs body. The app's
query-string limit is below gunicorn's request-line limit, so under gunicorn too a long
query string gets the pairs error. The longest legitimate request is an acknowledgment
(two URLs and a urlkey): 1-2 KB with 255-byte file names, percent-encoded.
"""

from __future__ import annotations

from collections.abc import Mapping
from operator import methodcaller
from typing import Any

MAX_QUERY_STRING = 4096  # bytes of QUERY_STRING; app: 400 `error {query string ...}`
# Bytes of a request's body: the one route taking one is OAI-PMH's POST, whose arguments are
# a GET's query string sent there; Werkzeug read it whole, however long (200 MB: 800 MB of
# RSS, 3.9 s). Beyond it, 413 (create_app's MAX_CONTENT_LENGTH; chunked bodies included).
MAX_BODY = MAX_QUERY_STRING
MAX_REQUEST_LINE = 8190  # gunicorn limit_request_line (its maximum): 414 beyond
MAX_HEADER_FIELD = 8190  # gunicorn limit_request_field_size: 431 beyond; app: 400
MAX_HEADER_FIELDS = 100  # gunicorn limit_request_fields: 431 beyond; app: 400


def problem(environ: Mapping[str, Any]) -> str | None:
    """Why a WSGI request breaks the limits, or None."""
    query = environ.get("QUERY_STRING", "")
    if len(query) > MAX_QUERY_STRING:
        return f"query string longer than {MAX_QUERY_STRING} bytes"
    return header_problem(environ)


def header_problem(environ: Mapping[str, Any]) -> str | None:
    """Why a WSGI request's header fields break the limits, or None. gunicorn joins the fields
    of one name with commas (100 of 8190 bytes: one value of 800 KB), so a value is held to
    one field's limit here too."""
    # The HTTP_ names picked out by C (filter, methodcaller), not a Python loop over every key
    # of the environ: this runs on every request, and a urlRequest's environ has ~20 keys and
    # one or two header fields (a loop over them all was 16 % of its bytecodes).
    names = list(filter(_IS_FIELD, environ))
    if len(names) > MAX_HEADER_FIELDS:
        return f"more than {MAX_HEADER_FIELDS} header fields"
    for name in names:
        value = environ[name]
        if isinstance(value, str) and len(name) - 5 + len(value) + 2 > MAX_HEADER_FIELD:
            return f"header field longer than {MAX_HEADER_FIELD} bytes"
    return None


_IS_FIELD = methodcaller("startswith", "HTTP_")


class RefusingOversized:
    """WSGI middleware: a request whose header fields break the limits is answered 400 with
    one line saying which, before `app` reads any of them."""

    def __init__(self, app):
        self.app = app

    def __call__(self, environ, start_response):
        problem = header_problem(environ)
        if problem is None:
            return self.app(environ, start_response)
        body = (problem + "\n").encode()
        start_response(
            "400 Bad Request",
            [("Content-Type", "text/plain; charset=utf-8"), ("Content-Length", str(len(body)))],
        )
        return [body]
