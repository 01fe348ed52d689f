"""The service's path is answered in plain WSGI (web.ServiceEndpoint) for GET and HEAD, and by
Flask for everything else: both must look like one HTTP resource to a client."""

from __future__ import annotations

import glob
import logging

from archive_service.protocol import pairs
from support import SERVICE, Client

QUERY = "servicesubject=urlRequest&clientinformation.ipaddress=150.163.2.174&parsedibiurl.ibi="


def test_head_gives_the_get_headers_and_no_body(client: Client):
    got = client.test.get(client.path(f"/{SERVICE}?{QUERY}8JMKD3MGP8W/35MMLL8"))
    head = client.test.head(client.path(f"/{SERVICE}?{QUERY}8JMKD3MGP8W/35MMLL8"))
    assert head.status_int == 200 and head.body == b""
    assert (
        head.headers["Content-Type"]
        == got.headers["Content-Type"]
        == "text/plain; charset=us-ascii"
    )
    # The same length: the answers differ only in their urlkey's nonce.
    assert int(head.headers["Content-Length"]) == len(got.body) > 0


def test_other_methods_are_refused_as_flask_refuses_them(client: Client):
    post = client.test.post(
        client.path(f"/{SERVICE}?{QUERY}8JMKD3MGP8W/35MMLL8"), expect_errors=True
    )
    assert post.status_int == 405
    assert set(post.headers["Allow"].split(", ")) >= {"GET", "HEAD"}
    options = client.test.options(client.path(f"/{SERVICE}"))
    assert options.status_int == 200 and "GET" in options.headers["Allow"]


def test_only_the_service_path_itself_is_the_service(client: Client):
    assert (
        client.test.get(
            client.path(f"/{SERVICE}/?{QUERY}8JMKD3MGP8W/35MMLL8"), expect_errors=True
        ).status_int
        == 404
    )
    assert (
        client.test.get(
            client.path(f"/{SERVICE.upper()}?{QUERY}8JMKD3MGP8W/35MMLL8"), expect_errors=True
        ).status_int
        == 404
    )


def test_a_bad_request_is_a_400_pairs_error(client: Client):
    response = client.test.get(
        client.path(f"/{SERVICE}?servicesubject=nonsense"), expect_errors=True
    )
    assert response.status_int == 400
    assert response.headers["Content-Type"] == "text/plain; charset=us-ascii"
    assert dict(pairs.parse(response.text)) == {"error": "{unknown servicesubject}"}


def test_an_index_broken_under_the_service_is_a_500_pairs_error_and_logged(settings, caplog):
    from archive_service.web import create_app

    client = Client(create_app(settings), "")
    assert client.url_request("8JMKD3MGP8W/35MMLL8").status_int == 200
    for path in glob.glob(f"{settings['state_dir']}/index/*.sqlite3*"):
        with open(path, "r+b") as stream:  # the same file, overwritten: open readers see it
            stream.write(b"not a database" * 1000)
    with caplog.at_level(logging.ERROR, logger="archive_service.web"):
        response = client.test.get(
            client.path(f"/{SERVICE}?{QUERY}8JMKD3MGP7W/3EPGUE5"), expect_errors=True
        )
    assert response.status_int == 500
    assert response.text == "error {internal error}"
    assert any("unexpected error" in r.getMessage() and r.exc_info for r in caplog.records)
