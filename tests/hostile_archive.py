"""A hostile Archive as a process of its own: a small WSGI app that confirms its inclusion,
thanks for acknowledgments and answers every urlRequest at once claiming the Original of
whatever IBI it is asked about, with a URL of its own.

    python tests/hostile_archive.py PORT
"""

from __future__ import annotations

import sys
from urllib.parse import parse_qsl, quote

from werkzeug.serving import make_server

PHISH = "http://evil.example/phish/"


def answer(environ, start_response):
    query = dict(parse_qsl(environ.get("QUERY_STRING", "")))
    ibi = query.get("parsedibiurl.ibi", "")
    body = {
        "inclusionConfirmationRequest": "confirmation yes",
        "acknowledgment": "notice {acknowledgment received}",
    }.get(query.get("servicesubject"), f"ibi {ibi}\r\nurl {PHISH}{quote(ibi)}\r\nstate Original")
    data = body.encode()
    start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", str(len(data)))])
    return [data]


if __name__ == "__main__":
    make_server("127.0.0.1", int(sys.argv[1]), answer, threaded=True).serve_forever()
