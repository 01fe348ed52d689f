"""What a browser is told of each answer (issue 30, finding 4), with WebTest: a deposited file
that runs scripts (HTML, SVG, XML) is sandboxed off the Archive's origin, every file and page
says nosniff, and the pages keep out of frames and keep their queries to the site. The same
through nginx and Apache sending the files (test_proxy_offload.py) and in a real browser
(test_pages_browser.py)."""

from __future__ import annotations

import gzip
from urllib.parse import quote

import pytest
import webtest

from archive_service.web import create_app, landing
from archive_service.web.headers import PAGE_POLICY, runs_scripts, script_hash
from fronts import FILES_DIR, TARGET_FILE
from support import SERVICE

SCRIPTED = {
    "exfil.html": b"<script>fetch('/col/x')</script>",
    "page.xhtml": b'<html xmlns="http://www.w3.org/1999/xhtml"><script>1</script></html>',
    "drawing.svg": b'<svg xmlns="http://www.w3.org/2000/svg"><script>1</script></svg>',
    "data.xml": b"<?xml version='1.0'?><a/>",
}


@pytest.fixture
def deposited(collection):
    doc = collection / FILES_DIR / "doc"
    for name, body in SCRIPTED.items():
        (doc / name).write_bytes(body)
    return collection


@pytest.fixture(params=["none", "x-accel-redirect", "x-sendfile"])
def app(request, settings, deposited):
    return webtest.TestApp(create_app({**settings, "file_offload": request.param}))


@pytest.mark.parametrize("name", sorted(SCRIPTED))
def test_a_file_that_runs_scripts_is_sandboxed(app, name):
    got = app.get(f"/col/{FILES_DIR}/doc/{name}")
    assert got.headers["Content-Security-Policy"] == "sandbox"
    assert got.headers["X-Content-Type-Options"] == "nosniff"
    # Revalidated, the answer says it again (a browser keeps the 304's headers).
    etag = got.headers.get("ETag")
    if got.body:  # sent by the app, not handed to a proxy
        again = app.get(f"/col/{FILES_DIR}/doc/{name}", headers={"If-None-Match": etag})
        assert again.status_int == 304
        assert again.headers["Content-Security-Policy"] == "sandbox"


@pytest.mark.parametrize("path", [TARGET_FILE, f"{FILES_DIR}/doc/leiame.txt"])
def test_other_files_are_not_sniffed_nor_sandboxed(app, path):
    # A PDF under `sandbox` is refused by Chromium's viewer: only what runs scripts gets it.
    got = app.get(quote(f"/col/{path}"))
    assert got.headers["X-Content-Type-Options"] == "nosniff"
    assert "Content-Security-Policy" not in got.headers


@pytest.mark.parametrize(
    ("path", "status"),
    [
        ("/", 200),
        (f"/{SERVICE}/items?q=banon", 200),
        (f"/{SERVICE}/filelist/{FILES_DIR}", 200),
        (f"/{SERVICE}/statistics", 200),
        ("/health", 200),
        (f"/col/{FILES_DIR}/doc/absent.html", 404),
        ("/nowhere", 404),
    ],
)
def test_pages_keep_out_of_frames_and_keep_their_queries(app, path, status):
    got = app.get(path, status=status)
    assert got.headers["X-Content-Type-Options"] == "nosniff"
    # The one inline script the pages run (the landing page's copy button), by its hash.
    allowed = f"{PAGE_POLICY}; script-src {script_hash(landing.COPY_SCRIPT)}"
    assert got.headers["Content-Security-Policy"] == allowed
    assert "frame-ancestors 'none'" in PAGE_POLICY
    assert got.headers["Referrer-Policy"] == "same-origin"


@pytest.mark.parametrize(
    ("mimetype", "runs"),
    [
        ("text/html; charset=utf-8", True),
        ("image/svg+xml", True),
        ("application/atom+xml", True),
        ("APPLICATION/XHTML+XML", True),
        ("application/pdf", False),
        ("text/plain", False),
        ("image/png", False),
        ("", False),
    ],
)
def test_what_runs_scripts(mimetype, runs):
    assert runs_scripts(mimetype) is runs


@pytest.mark.parametrize(
    "name, kind, encoding",
    [
        ("drawing.svgz", "image/svg+xml", "gzip"),  # an image the browser inflates and shows
        ("data.tar.gz", "application/gzip", None),  # saved as the gzip bytes it is
        ("paper.ps.gz", "application/gzip", None),
        ("dump.xz", "application/x-xz", None),
    ],
)
def test_a_compressed_file_is_described_as_its_bytes(app, collection, name, kind, encoding):
    """A .svgz was served as image/svg+xml with no Content-Encoding (a browser showed gzip
    bytes as broken SVG), and a .tar.gz as application/x-tar (gzip bytes under a tar's
    type). The file and the proxy sending it are told the same."""
    (collection / FILES_DIR / "doc" / name).write_bytes(gzip.compress(b"<svg/>"))
    # Flask's client: WebTest inflates a gzip-encoded body and drops the header it checks.
    got = app.app.test_client().get(f"/col/{FILES_DIR}/doc/{name}")
    got.close()
    assert got.headers["Content-Type"].split(";")[0] == kind
    assert got.headers.get("Content-Encoding") == encoding
