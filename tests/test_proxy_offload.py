"""The real nginx and Apache of contrib/ (Debian's, started as Debian starts them) in front of
the real `serve`: the proxy sends the bytes
of /col/ files the service chose (file_offload), and a licensed item is refused to a user
outside its networks however the user spoofs X-Forwarded-For."""

from __future__ import annotations

import http.client
import os
import re
from pathlib import Path
from urllib.parse import quote

import pytest
import webtest

from archive_service.web import create_app
from fronts import (
    APACHE_MODULES,
    APACHE_VHOST,
    BACKEND,
    COLLECTION,
    FILES_DIR,
    NGINX_SITE,
    TARGET_FILE,
    check_front,
    needs_debian_apache,
    needs_debian_nginx,
    rewrite,
    serve_behind,
    start_debian_apache,
    start_debian_nginx,
)
from serve_process import SERVICE, Serve, free_port

LICENSED = "sid.inpe.br/mtc-m19/2014/02.11.10.05"
INSIDER, OUTSIDER = "127.0.0.3", "127.0.0.2"  # the proxy itself is 127.0.0.1


def nginx_site(port: int, serve: Serve, public: Path) -> str:
    return rewrite(
        NGINX_SITE.read_text(),
        ("listen 80;", f"listen 127.0.0.1:{port};"),
        (f"server {BACKEND};", f"server {serve.address};"),
        (f"alias {COLLECTION}/;", f"alias {public / 'collection'}/;"),
    )


def get_from(source: str, port: int, path: str, headers: dict | None = None) -> tuple[int, bytes]:
    connection = http.client.HTTPConnection(
        "127.0.0.1", port, timeout=20, source_address=(source, 0)
    )
    try:
        connection.request("GET", path, headers=headers or {})
        response = connection.getresponse()
        return response.status, response.read()
    finally:
        connection.close()


DEPOSITED_PAGE = "exfil.html"  # someone else's page, deposited in an open item


def deposit_page(public: Path) -> None:
    page = public / "collection" / FILES_DIR / "doc" / DEPOSITED_PAGE
    page.write_bytes(b"<script>fetch('/col/')</script>")
    page.chmod(0o644)


def check_sandboxed(port: int) -> None:
    """The headers the service gives a file (test_browser_headers.py), as the proxy that sent
    its bytes answers: a deposited page sandboxed, every file nosniff."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=20)
    for name, policy in ((DEPOSITED_PAGE, "sandbox"), ("leiame.txt", None)):
        connection.request("GET", f"/col/{FILES_DIR}/doc/{name}")
        response = connection.getresponse()
        response.read()
        assert response.status == 200, name
        assert response.getheader("Content-Security-Policy") == policy, name
        assert response.getheader("X-Content-Type-Options") == "nosniff", name
    connection.close()


def col_lines(log: str) -> list[tuple[str, str]]:
    return re.findall(r'"GET (/col/\S+) HTTP/1\.[01]" (\d+ \d+)', log)


@pytest.mark.process
@needs_debian_nginx
def test_nginx_sends_the_files_serve_chooses(public, tmp_path, fronts):
    deposit_page(public)
    port = free_port()
    serve = serve_behind(public, tmp_path, port, fronts, "--file-offload", "x-accel-redirect")
    front = start_debian_nginx(fronts, public, port, nginx_site(port, serve, public))
    check_front(front.url, public / "collection")
    check_sandboxed(port)
    sent = [size for _, size in col_lines(serve.log()) if size.startswith("200 ")]
    assert sent and set(sent) == {"200 0"}, sent  # nginx sent the bytes
    # The internal location is not reachable from outside.
    status, _ = get_from("127.0.0.1", port, "/.archive-service-files/" + quote(TARGET_FILE))
    assert status == 404


@pytest.mark.process
@needs_debian_apache
@pytest.mark.skipif(
    not (APACHE_MODULES / "mod_xsendfile.so").exists(),
    reason="mod_xsendfile is not installed (Debian: libapache2-mod-xsendfile)",
)
def test_apache_sends_the_files_serve_chooses(public, tmp_path, fronts):
    deposit_page(public)
    port = free_port()
    serve = serve_behind(public, tmp_path, port, fronts, "--file-offload", "x-sendfile")
    site = rewrite(
        APACHE_VHOST.read_text(),
        ("*:80", f"*:{port}"),
        (BACKEND, serve.address),
        (COLLECTION, str(public / "collection")),
    )
    front = start_debian_apache(
        fronts, public, port, site, "proxy", "proxy_http", "headers", "xsendfile"
    )
    check_front(front.url, public / "collection")
    check_sandboxed(port)
    sent = [size for _, size in col_lines(serve.log()) if size.startswith("200 ")]
    assert sent and set(sent) == {"200 0"}, sent  # Apache sent the bytes


@pytest.mark.process
@needs_debian_nginx
def test_licensed_files_through_nginx(public, tmp_path, fronts):
    sidecar = public / "collection" / LICENSED / "item.yaml"
    sidecar.write_text(
        sidecar.read_text().replace(
            "    - 150.163.0.0/16", f"    - 150.163.0.0/16\n    - {INSIDER}/32"
        )
    )
    port = free_port()
    serve = serve_behind(public, tmp_path, port, fronts, "--trusted-proxies", "127.0.0.1")
    start_debian_nginx(fronts, public, port, nginx_site(port, serve, public))
    file = f"/col/{LICENSED}/doc/article.pdf"
    filelist = f"/{SERVICE}/filelist/{LICENSED}"
    article = (public / "collection" / LICENSED / "doc" / "article.pdf").read_bytes()
    assert get_from(INSIDER, port, file) == (200, article)
    assert get_from(INSIDER, port, filelist)[0] == 200
    assert get_from(OUTSIDER, port, file)[0] == 403
    assert get_from(OUTSIDER, port, filelist)[0] == 403
    # nginx appends the address it heard from: the spoofed one on the left does not count.
    assert get_from(OUTSIDER, port, file, {"X-Forwarded-For": INSIDER})[0] == 403


# ------------------------------------------------------------------ the app's side, WebTest


@pytest.mark.parametrize(
    "how, header", [("x-accel-redirect", "X-Accel-Redirect"), ("x-sendfile", "X-Sendfile")]
)
def test_offloaded_answers_name_the_file_and_still_check_the_user(
    settings, collection, how, header
):
    app = webtest.TestApp(
        create_app({**settings, "file_offload": how}), extra_environ={"REMOTE_ADDR": "192.0.2.7"}
    )
    response = app.get(quote(f"/col/{TARGET_FILE}"))
    assert response.status_int == 200 and response.body == b""
    assert response.content_type == "application/pdf"
    if how == "x-sendfile":
        # The collection as configured (the XSendFilePath), and the file's own ETag.
        assert response.headers[header] == os.fsencode(collection / TARGET_FILE).decode("latin-1")
        with create_app(settings).test_client().get(quote(f"/col/{TARGET_FILE}")) as sent:
            assert response.headers["ETag"] == sent.headers["ETag"]
    else:
        assert response.headers[header] == "/.archive-service-files/" + quote(TARGET_FILE)
    assert app.get(f"/col/{LICENSED}/doc/article.pdf", status=403).headers.get(header) is None


needs_xsendfile = pytest.mark.skipif(
    not (APACHE_MODULES / "mod_xsendfile.so").exists(),
    reason="mod_xsendfile is not installed (Debian: libapache2-mod-xsendfile)",
)


def head_of(port: int, path: str, headers: dict | None = None) -> tuple[int, dict, bytes]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=20)
    try:
        connection.request("GET", path, headers=headers or {})
        response = connection.getresponse()
        return response.status, dict(response.getheaders()), response.read()
    finally:
        connection.close()


def start_xsendfile_apache(public, tmp_path, fronts, collection: Path, *args: str) -> int:
    """contrib's Apache site with mod_xsendfile before `serve --file-offload x-sendfile`
    whose collection (and XSendFilePath, as the file's steps say) is `collection`."""
    port = free_port()
    serve = serve_behind(public, tmp_path, port, fronts, "--file-offload", "x-sendfile", *args)
    site = rewrite(
        APACHE_VHOST.read_text(),
        ("*:80", f"*:{port}"),
        (BACKEND, serve.address),
        (COLLECTION, str(collection)),
    )
    start_debian_apache(fronts, public, port, site, "proxy", "proxy_http", "headers", "xsendfile")
    return port


@pytest.mark.process
@needs_debian_apache
@needs_xsendfile
def test_apache_offloaded_files_keep_their_own_etag(public, tmp_path, fronts):
    # mod_xsendfile, on a proxied answer, made the ETag from no file: "0" for every file, so a
    # cache holding any of them (revalidated at each use: no-cache) kept it for ever after the
    # file changed, and `If-None-Match: "0"` got 304 for every file of the collection.
    port = start_xsendfile_apache(public, tmp_path, fronts, public / "collection")
    doc = public / "collection" / FILES_DIR / "doc"
    one, other = (f"/col/{FILES_DIR}/doc/{name}" for name in ("reference.bib", "leiame.txt"))
    status, first, _ = head_of(port, one)
    assert status == 200 and head_of(port, other)[1]["ETag"] != first["ETag"], first
    assert head_of(port, other, {"If-None-Match": first["ETag"]})[0] == 200
    assert head_of(port, one, {"If-None-Match": first["ETag"]})[0] == 304
    (doc / "reference.bib").write_bytes(b"@misc{changed}\n")
    status, _, body = head_of(port, one, {"If-None-Match": first["ETag"]})
    assert (status, body) == (200, b"@misc{changed}\n")


@pytest.mark.process
@needs_debian_apache
@needs_xsendfile
def test_apache_offloads_files_of_a_collection_reached_through_a_link(public, tmp_path, fronts):
    # The collection may be a symlink (docs/reliability.md). serve named the file by its real
    # path, which mod_xsendfile refused (404) under the XSendFilePath the admin wrote: the
    # collection as configured.
    link = public / "collection-link"
    link.symlink_to(public / "collection")
    port = start_xsendfile_apache(public, tmp_path, fronts, link, "--collection", str(link))
    status, _, body = head_of(port, quote(f"/col/{TARGET_FILE}"))
    assert (status, body) == (200, (public / "collection" / TARGET_FILE).read_bytes())


def test_a_file_whose_offload_header_is_too_long_for_nginx_is_sent_by_serve(settings, collection):
    """nginx holds an answer's headers in its 4 KB proxy_buffer_size: a file seven folders
    of 160 accented characters deep made a 4.0 KB X-Accel-Redirect (each UTF-8 byte three
    characters escaped), 4.5 KB of headers, and nginx answered 502 (issue 30, seventh pass).
    Such a file is sent by serve itself."""
    item = TARGET_FILE.split("/doc/")[0]
    deep = collection / item / "doc" / "/".join(["ação" * 40] * 7)
    deep.mkdir(parents=True)
    (deep / "dados.csv").write_bytes(b"a,b\n1,2\n")
    app = webtest.TestApp(create_app({**settings, "file_offload": "x-accel-redirect"}))
    response = app.get(
        quote(f"/col/{item}/doc/{deep.relative_to(collection / item / 'doc')}/dados.csv")
    )
    assert response.body == b"a,b\n1,2\n" and "X-Accel-Redirect" not in response.headers
    sent = sum(len(k) + len(v) + 4 for k, v in response.headerlist)
    assert sent < 3 * 1024, sent
    assert app.get(quote(f"/col/{TARGET_FILE}")).headers["X-Accel-Redirect"]  # others offloaded
