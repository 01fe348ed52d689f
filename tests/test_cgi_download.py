"""contrib's CGI program sends a /col/ file without Flask (issue 35): a download, its HEAD,
a Range (206) and a conditional GET (304) import neither Flask, Jinja nor Flask-Babel, and
each answer is the one create_app's app gives through WebTest, status, headers and body
byte for byte. What needs a page (a licensed file's 403, a symbolic link out of doc/'s 404)
goes to the whole app, with the same answer; a GET is one use counted, a HEAD none."""

from __future__ import annotations

import os
import re
import shutil
import time
from pathlib import Path
from urllib.parse import quote

import pytest
import webtest

from archive_service import settings
from archive_service.stores import stats
from archive_service.stores.stats import counter
from archive_service.web import create_app
from fronts import FILES_DIR, TARGET_FILE, indexed_for_cgi, run_cgi
from support import SAMPLE

# prometheus_client too: a CGI process's counts die with it (docs/metrics.md).
FRAMEWORKS = ("flask", "jinja2", "flask_babel", "prometheus_client")
LICENSED = "sid.inpe.br/mtc-m19/2014/02.11.10.05/doc/article.pdf"  # networks 150.163.0.0/16
SVG = f"{FILES_DIR}/doc/drawing.svg"  # a type that runs scripts: sandboxed
HTML = f"{FILES_DIR}/doc/read-me.html"  # the depositor's words, not the pages'
ESCAPE = f"{FILES_DIR}/doc/escape.yaml"  # a symbolic link to the item's item.yaml


@pytest.fixture(scope="module")
def archive(tmp_path_factory) -> tuple[Path, webtest.TestApp]:
    """A copy of the sample with an SVG file and a link out of doc/, its index built, and the
    app create_app makes of its settings, as CGI makes it (no walk)."""
    folder = tmp_path_factory.mktemp("cgi-download")
    collection = folder / "collection"
    shutil.copytree(SAMPLE, collection, symlinks=True)
    (collection / SVG).write_text('<svg xmlns="http://www.w3.org/2000/svg"/>\n')
    (collection / ESCAPE).symlink_to("../item.yaml")
    (collection / HTML).write_text('<!doctype html><html lang="en"><p>Read me</p></html>\n')
    return indexed_for_cgi(folder, collection)


def through_cgi(config: Path, path: str, method: str = "GET", **meta):
    """The CGI program's head lines and body for the file at `path`, with the names of the
    modules it imported last in the list (`-X importtime`)."""
    lines: list[str] = []
    head, body = run_cgi(
        b"/col/" + os.fsencode(path), "", config, lines, method, ("-X", "importtime"), meta
    )
    imported = {line.rsplit("|", 1)[1].strip() for line in lines if line.startswith("import time")}
    assert "archive_service.web.cgi" in imported  # the import times were read
    return head.split("\r\n"), body, imported


def same_answer(cgi, wsgi: webtest.TestResponse) -> None:
    head, body, _ = cgi
    expected = [f"Status: {wsgi.status}"] + [f"{k}: {v}" for k, v in wsgi.headerlist]
    if not wsgi.body and "Content-Length" not in wsgi.headers:
        # wsgiref's handler (finish_content) says so of an empty body, whatever the app.
        expected.append("Content-Length: 0")
    # Werkzeug's conditional answers carry the Date of the moment, a second apart or not.
    dated = re.compile(r"^Date: .*GMT$")
    assert [dated.sub("Date: *", line) for line in head] == [
        dated.sub("Date: *", line) for line in expected
    ]
    assert body == wsgi.body


def lean(cgi) -> None:
    """The CGI answer was web/download.py's, with no framework imported."""
    imported = cgi[2]
    assert not imported & set(FRAMEWORKS), sorted(imported & set(FRAMEWORKS))
    assert "archive_service.web.download" in imported


def wsgi_get(app: webtest.TestApp, path: str, method: str = "get", **kwargs):
    return getattr(app, method)("/col/" + quote(path), expect_errors=True, **kwargs)


@pytest.mark.process
@pytest.mark.parametrize("path", [TARGET_FILE, SVG, HTML], ids=["pdf", "svg", "html"])
def test_a_download_and_its_head_are_the_wsgi_answers_without_flask(archive, path):
    config, app = archive
    wsgi = wsgi_get(app, path)
    assert wsgi.status_int == 200 and wsgi.headers["X-Content-Type-Options"] == "nosniff"
    cgi = through_cgi(config, path)
    same_answer(cgi, wsgi)
    lean(cgi)
    head = through_cgi(config, path, "HEAD")
    same_answer(head, wsgi_get(app, path, "head"))
    lean(head)


@pytest.mark.process
def test_a_range_and_a_conditional_get_are_the_wsgi_answers_without_flask(archive):
    config, app = archive
    ranged = wsgi_get(app, TARGET_FILE, headers={"Range": "bytes=10-99"})
    assert ranged.status_int == 206 and len(ranged.body) == 90
    cgi = through_cgi(config, TARGET_FILE, HTTP_RANGE="bytes=10-99")
    same_answer(cgi, ranged)
    lean(cgi)
    etag = ranged.headers["ETag"]
    unchanged = wsgi_get(app, TARGET_FILE, headers={"If-None-Match": etag})
    assert unchanged.status_int == 304
    cgi = through_cgi(config, TARGET_FILE, HTTP_IF_NONE_MATCH=etag)
    same_answer(cgi, unchanged)
    lean(cgi)


@pytest.mark.process
@pytest.mark.parametrize(
    ("path", "status"), [(LICENSED, 403), (ESCAPE, 404)], ids=["licensed", "link out of doc"]
)
def test_a_refusal_is_the_wsgi_answer(archive, path, status):
    config, app = archive
    wsgi = wsgi_get(app, path)
    assert wsgi.status_int == status
    same_answer(through_cgi(config, path), wsgi)


@pytest.mark.process
def test_a_cgi_download_is_one_use_and_its_head_none(archive):
    config, app = archive
    store = stats.open_store(settings.load(str(config)).state_dir, None)

    def requests() -> int:
        app.app.extensions["stats"].flush()  # the other tests' WebTest uses, written now
        store.flush()
        uses = store.uses(0, time.time() + 60)
        return sum(use.kind == counter.REQUEST for use in uses)

    before = requests()
    lean(through_cgi(config, TARGET_FILE, "HEAD"))
    assert requests() == before
    lean(through_cgi(config, TARGET_FILE))
    assert requests() == before + 1


@pytest.mark.process
@pytest.mark.parametrize("how", ["x-sendfile", "x-accel-redirect"])
def test_an_offloaded_file_is_the_wsgi_answer_without_flask(archive, how):
    config, _ = archive
    offloading = config.with_name(f"{how}.yaml")  # the same collection and index
    offloading.write_text(config.read_text() + f"file_offload: {how}\n")
    app = webtest.TestApp(
        create_app(settings.load(str(offloading)), refresh=False), extra_environ={"SCRIPT_NAME": ""}
    )
    wsgi = wsgi_get(app, TARGET_FILE)
    assert wsgi.status_int == 200 and wsgi.body == b""
    assert {"X-Sendfile", "X-Accel-Redirect"} & set(wsgi.headers)
    cgi = through_cgi(offloading, TARGET_FILE)
    same_answer(cgi, wsgi)
    lean(cgi)


def test_an_html_file_says_nothing_of_the_pages_language(archive):
    """A deposited HTML file was sent with the Content-Language the reader's Accept-Language
    chose for the pages (pt-BR for an English file) and a Vary on it: both the pages'."""
    _, app = archive
    for accept in ("pt-BR", "en"):
        file = wsgi_get(app, HTML, headers={"Accept-Language": accept})
        assert file.status_int == 200 and file.content_type == "text/html"
        assert "Content-Language" not in file.headers, file.headers
        assert "Accept-Language" not in file.headers.get("Vary", "")
    page = app.get("/", headers={"Accept-Language": "pt-BR"})
    assert page.headers["Content-Language"] == "pt-BR"
