"""A client's `SCRIPT_NAME:` or `PATH_INFO:` header is not the mount point: the real `serve`
answers as if it had not been sent (gunicorn takes those headers from peers it trusts, and
loopback is one by default: a 500, or URLs with the client's prefix in its answer)."""

from __future__ import annotations

import http.client

import pytest

from archive_service.protocol import pairs
from serve_process import SAMPLE, SERVICE, Serve, resolver_serve

pytestmark = pytest.mark.process

TARGET_IBI = "8JMKD3MGP7W/3EPGUE5"
QUERY = (
    f"/{SERVICE}?servicesubject=urlRequest&clientinformation.ipaddress=127.0.0.1"
    f"&parsedibiurl.ibi={TARGET_IBI}"
)


@pytest.fixture(scope="module")
def service(tmp_path_factory):
    tmp_path = tmp_path_factory.mktemp("script-name")
    config = tmp_path / "archive-service.yaml"
    config.write_text(
        f"collection: {SAMPLE}\narchiveserviceibi: {SERVICE}\n"
        f"resolver: none\nstate_dir: {tmp_path / 'state'}\n"
    )
    process = Serve(tmp_path, config=config)
    process.wait_answering()
    yield process
    process.stop()


def get(address: str, path: str, headers: dict[str, str]) -> tuple[int, str]:
    connection = http.client.HTTPConnection(*address.split(":"), timeout=10)
    try:
        connection.request("GET", path, headers=headers)
        response = connection.getresponse()
        return response.status, response.read().decode("utf-8", "replace")
    finally:
        connection.close()


@pytest.mark.parametrize(
    "headers",
    [
        {"SCRIPT_NAME": "/evil"},
        {"SCRIPT_NAME": f"/{SERVICE}"},
        {"PATH_INFO": "/col/x"},
        {"SCRIPT_NAME": "/evil", "PATH_INFO": "/"},
    ],
)
def test_mount_point_headers_are_dropped(service, headers):
    status, body = get(service.address, QUERY, headers)
    assert status == 200, body
    url = dict(pairs.parse(body))["url"]
    assert url.startswith(f"http://{service.address}/col/"), url
    status, body = get(service.address, "/", headers)
    assert status == 200 and f'<a href="http://{service.address}/{SERVICE}">' in body, body
    assert f'<a href="/{SERVICE}/items">' in body, body  # the page's own links too


@pytest.fixture(scope="module")
def resolver(tmp_path_factory):
    process, url = resolver_serve(tmp_path_factory.mktemp("script-name-resolver"))
    yield url.removeprefix("http://")
    process.stop()


@pytest.mark.parametrize("headers", [{"SCRIPT_NAME": "/evil"}, {"PATH_INFO": "/x"}])
def test_the_resolvers_mount_point_headers_are_dropped(resolver, headers):
    """The resolver's gunicorn took them from loopback peers too (the eleventh pass)."""
    status, body = get(resolver, "/", headers)
    assert status == 200 and "/evil" not in body, (status, body[:300])
