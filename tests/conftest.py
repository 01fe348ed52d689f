"""Shared fixtures: a private copy of the sample collection and the app, mounted or not."""

from __future__ import annotations

import os
import shutil
import socket
from pathlib import Path

import pytest
import webtest
from werkzeug.exceptions import NotFound
from werkzeug.middleware.dispatcher import DispatcherMiddleware

from archive_service.web import create_app

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "sample_collection"
SERVICE = "sid.inpe.br/mtc-m18@80/2008/03.17.15.17"
PLATFORM = "dpi.inpe.br/banon/1998/08.02.08.56"
ADDRESS = "mtc-m16c.sid.inpe.br"


@pytest.fixture(autouse=True, scope="session")
def private_data_home(tmp_path_factory):
    """Settings without a state_dir default to the user's data directory: keep tests (and the
    serve processes they start, which inherit the environment) out of the real one."""
    home = tmp_path_factory.mktemp("data-home")
    old = os.environ.get("XDG_DATA_HOME")
    os.environ["XDG_DATA_HOME"] = str(home)
    yield home
    if old is None:
        del os.environ["XDG_DATA_HOME"]
    else:
        os.environ["XDG_DATA_HOME"] = old


@pytest.fixture
def collection(tmp_path: Path) -> Path:
    """A copy of sample_collection the test may change."""
    target = tmp_path / "collection"
    shutil.copytree(SAMPLE, target, symlinks=True)
    return target


@pytest.fixture
def settings(collection: Path, tmp_path: Path) -> dict:
    return {
        "collection": str(collection),
        "archiveaddress": ADDRESS,
        "archiveserviceibi": SERVICE,
        "platformsoftware": PLATFORM,
        "resolver": "none",
        "state_dir": str(tmp_path / "state"),
    }


class Client:
    """WebTest over the app, either at the root or mounted under a prefix through WSGI."""

    def __init__(self, app, mount: str):
        self.mount = mount
        self.app = app
        wsgi = DispatcherMiddleware(NotFound(), {mount: app}) if mount else app
        self.test = webtest.TestApp(wsgi)

    def path(self, path: str) -> str:
        return self.mount + path

    def service(self, status=200, **params):
        return self.test.get(self.path("/" + SERVICE), params=params, status=status)

    def url_request(self, ibi: str, status=200, ip="150.163.2.175", **extra):
        params = {"servicesubject": "urlRequest", "clientinformation.ipaddress": ip,
                  "parsedibiurl.ibi": ibi}
        params.update({f"parsedibiurl.{k}": v for k, v in extra.items()})
        return self.test.get(self.path("/" + SERVICE), params=params, status=status)

    def get(self, path: str, **kwargs):
        return self.test.get(self.path(path), **kwargs)

    def get_url(self, url: str, **kwargs):
        """GET an absolute URL the Archive handed out (its host is archiveaddress)."""
        prefix = f"http://{ADDRESS}"
        assert url.startswith(prefix + self.mount), url
        return self.test.get(url[len(prefix):], **kwargs)


@pytest.fixture(params=["", "/archive"], ids=["root", "mounted"])
def client(request, settings) -> Client:
    return Client(create_app(settings), request.param)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]
