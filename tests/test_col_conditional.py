"""`/col/` files under a precondition that fails: `If-Match` naming another version is 412
with no byte of the file. Werkzeug's `make_conditional` sets 412 and keeps the body, so the
whole file went out under a status that docs/counter.md counts as no use (a download anyone
could keep out of the statistics by adding one header)."""

from __future__ import annotations

from archive_service.protocol import pairs
from archive_service.web import create_app
from support import ADDRESS, Client

RELATORIO = "8JMKD3MGP7W/3EPGUE5"  # sid.inpe.br/mtc-m19/2013/09.04.12.27.57


def test_a_failed_if_match_serves_no_byte_of_the_file(settings):
    client = Client(create_app(settings), "")
    got = dict(pairs.parse(client.url_request(RELATORIO).text))
    path = got["url"][len(f"http://{ADDRESS}") :]
    whole = client.test.get(path, status=200)
    assert len(whole.body) > 0
    for method in ("get", "head"):
        failed = getattr(client.test, method)(path, headers={"If-Match": '"another"'}, status=412)
        assert failed.body == b""
        assert failed.headers["Content-Length"] == "0"
    matched = client.test.get(path, headers={"If-Match": whole.headers["ETag"]}, status=200)
    assert matched.body == whole.body
