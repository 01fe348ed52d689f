"""Issue 35: persistent URLs resolved before Flask (resolver/redirects.py) are answered as
Flask answers them: the same status, headers and body, for redirects, alerts, queries, HEAD,
loops and the resolver's other routes; and a redirect is written without Flask. Flask's route
returns the same writer's redirect (`redirect_app`): the byte-for-byte comparison guards that
Flask's hooks add nothing the hot path leaves out. (A conflict's
alert is left out: which Archive it names first depends on which answered first.) The
registry is read again only when it changed."""

from __future__ import annotations

import flask
import pytest
import webtest
from werkzeug.wrappers import Response

from archive_service.resolver.redirects import RedirectEndpoint
from archive_service.resolver.registry import Registry
from resolver_support import KEY_A, KEY_B, LL8, SERVICE_A, SERVICE_B
from test_resolver_app import PROXY, include_both

# test_resolver_app's fixtures: Archives A and B served on loopback, a registry, a resolver.
pytest_plugins = ["test_resolver_app"]

REQUESTS = [
    ("GET", "/8JMKD3MGP8W/35MMLL8", {}),
    ("GET", "/8JMKD3MGP8W/35MMLL8", {"Accept-Language": "pt-BR,fr;q=0.8"}),
    ("GET", "/8JMKD3MGP8W/35MMLL8", {"Cookie": "lang=pt-BR", "X-Forwarded-For": "10.0.0.1"}),
    ("GET", "/8JMKD3MGP8W/35MMLL8", {"Accept": "application/x-bibtex"}),
    ("HEAD", "/8JMKD3MGP8W/35MMLL8", {}),
    ("GET", f"/{LL8}", {}),
    ("GET", "/LK47B6W/362SFKH/reference.bib", {}),
    ("GET", "/LK47B6W/362SFKH/reference.bib?format=long&ibiurl.verblist=", {}),
    ("GET", "/8JMKD3MGP8W/35MMLL8?lang=pt-BR", {}),
    ("GET", "/8JMKD3MGP8W/35MMLL8!!", {}),
    ("GET", "/iconet.com.br/banon/2010/01.20.11.05", {"Accept-Language": "pt"}),
    ("GET", "/no.such/item/2020/01.01.00.00", {}),
    ("GET", "/8JMKD3MGP8W/35MMLL8", {"Via": "1.1 somewhere"}),
    ("POST", "/8JMKD3MGP8W/35MMLL8", {}),
    ("GET", "/static/x/y", {}),
    ("GET", "/health", {}),
    ("GET", "/", {}),
]


def redirect_endpoint(flask_app: flask.Flask) -> RedirectEndpoint:
    """The endpoint in front of Flask, under the middleware around it (metrics)."""
    layer = flask_app.wsgi_app
    while not isinstance(layer, RedirectEndpoint):
        layer = layer.app
    return layer


def flask_only(app: webtest.TestApp) -> webtest.TestApp:
    flask_app = app.app
    redirect_endpoint(flask_app)
    # The same app and its parts, with Flask's WSGI callable where the endpoint was.
    inner = flask.Flask.wsgi_app.__get__(flask_app)
    return webtest.TestApp(inner, extra_environ={"REMOTE_ADDR": PROXY})


def seen(response: webtest.TestResponse) -> tuple:
    headers = sorted((k, v) for k, v in response.headerlist if k.lower() != "date")
    return response.status, headers, response.body


@pytest.mark.parametrize(("method", "path", "headers"), REQUESTS)
def test_answered_as_flask_answers(resolver, archives, method, path, headers) -> None:
    include_both(resolver, archives)
    direct = flask_only(resolver)
    call = {"GET": "get", "HEAD": "head", "POST": "post"}[method]
    before = getattr(direct, call)(path, headers=headers, expect_errors=True)
    after = getattr(resolver, call)(path, headers=headers, expect_errors=True)
    assert seen(after) == seen(before)


def test_a_redirect_is_written_without_flask(resolver, archives, monkeypatch) -> None:
    include_both(resolver, archives)
    flask_app = resolver.app

    def no_flask(*args):
        raise AssertionError("Flask was called")

    monkeypatch.setattr(redirect_endpoint(flask_app), "app", no_flask)
    response = resolver.get("/8JMKD3MGP8W/35MMLL8")
    assert response.status_int == 302 and f"/col/{LL8}/doc/" in response.location
    with pytest.raises(AssertionError, match="Flask was called"):
        resolver.get("/8JMKD3MGP8W/35MMLL8!!", expect_errors=True)


def test_flasks_route_returns_the_hot_paths_redirect(resolver, archives) -> None:
    """One writer of the redirect: Flask's route returns `written_redirect` as a WSGI
    application, not a Werkzeug response of its own that had to be kept alike."""
    include_both(resolver, archives)
    flask_app, path = resolver.app, "/8JMKD3MGP8W/35MMLL8"
    with flask_app.test_request_context(path, environ_base={"REMOTE_ADDR": PROXY}):
        answer = flask_app.view_functions["pages.persistent"](_rest=path[1:])
    assert not isinstance(answer, Response)
    written = webtest.TestApp(answer).get(path, status=302)
    assert seen(written) == seen(resolver.get(path))


def test_the_registry_is_asked_again_only_when_its_changes_counter_moves(tmp_path) -> None:
    # Each round asks the registry's version: from the counter in memory while no write
    # was made, with no statement (PRAGMA data_version gave the interpreter away each time).
    registry = Registry(tmp_path)
    registry.register(SERVICE_A, KEY_A)
    store = registry._store
    first = store.version()
    statements: list[str] = []
    store._local.conn.set_trace_callback(statements.append)
    assert store.version() == first and registry.included() == []
    assert statements == []
    Registry(tmp_path).register(SERVICE_B, KEY_B)  # another worker's (or process's) write
    assert store.version() != first
    assert statements == ["PRAGMA data_version"]
