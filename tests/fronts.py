"""The real front web servers of contrib/ (apache2, nginx) in the foreground on free loopback
ports, in front of the real `serve`, and what a resolver and a browser check through them."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from archive_service.protocol import pairs
from serve_process import ROOT, SAMPLE, SERVICE, Serve

CONTRIB = ROOT / "contrib"
APACHE_VHOST = CONTRIB / "apache" / "archive-service.conf"
NGINX_SITE = CONTRIB / "nginx" / "archive-service.conf"
BACKEND = "127.0.0.1:8080"  # what the contrib files proxy to: serve's default bind
COLLECTION = "/srv/archive-service/collection"
TARGET_IBI = "8JMKD3MGP7W/3EPGUE5"  # target file "Relatório Final.pdf" (UTF-8, with a space)
TARGET_FILE = "sid.inpe.br/mtc-m19/2013/09.04.12.27.57/doc/Relatório Final.pdf"
FILES_IBI = "LK47B6W/362SFKH"  # several files, reference.bib among them
FILES_DIR = "iconet.com.br/banon/2009/09.09.22.01"


def executable(name: str) -> str | None:
    return shutil.which(name) or next(
        (p for p in (f"/usr/sbin/{name}", f"/sbin/{name}") if os.access(p, os.X_OK)), None
    )


APACHE = executable("apache2")
NGINX = executable("nginx")
APACHE_MODULES = Path("/usr/lib/apache2/modules")
needs_apache = pytest.mark.skipif(
    APACHE is None,
    reason="apache2 is not installed (Debian: apt-get install apache2 libapache2-mod-wsgi-py3)",
)
needs_nginx = pytest.mark.skipif(
    NGINX is None, reason="nginx is not installed (Debian: apt-get install nginx)"
)


def rewrite(text: str, *replacements: tuple[str, str]) -> str:
    """`text` with each old string replaced; every old string must be there (no silent no-op)."""
    for old, new in replacements:
        assert old in text, f"{old!r} not found: the test no longer matches the contrib file"
        text = text.replace(old, new)
    return text


@contextmanager
def public_copy() -> Iterator[Path]:
    """A directory Apache's and nginx's unprivileged user can read: a copy of the sample
    collection (pytest's tmp_path is private to root)."""
    top = Path(tempfile.mkdtemp(prefix="archive-service-contrib-"))
    top.chmod(0o755)
    shutil.copytree(SAMPLE, top / "collection")
    for directory, dirs, files in os.walk(top):
        for name in dirs:
            os.chmod(os.path.join(directory, name), 0o755)
        for name in files:
            os.chmod(os.path.join(directory, name), 0o644)
    yield top
    shutil.rmtree(top, ignore_errors=True)


def write_config(public: Path, address: str) -> Path:
    config = public / "archive-service.yaml"
    config.write_text(
        f"collection: {public / 'collection'}\narchiveaddress: {address}\n"
        f"archiveserviceibi: {SERVICE}\nplatformsoftware: dpi.inpe.br/banon/1998/08.02.08.56\n"
        "resolver: none\n"
    )
    config.chmod(0o644)
    return config


def fetch(url: str) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=20) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def url_request(front: str, ibi: str, extra: str = "") -> dict[str, str]:
    status, body = fetch(
        f"{front}/{SERVICE}?servicesubject=urlRequest"
        f"&clientinformation.ipaddress=127.0.0.1&parsedibiurl.ibi={ibi}{extra}"
    )
    assert status == 200, body
    return dict(pairs.parse(body.decode("ascii")))


def check_front(front: str, collection: Path, light: bool = False) -> None:
    """What the resolver and a browser do through the web server at `front`; `light` follows
    fewer links (CGI starts Python for every request)."""
    assert fetch(f"{front}/{SERVICE}?servicesubject=inclusionConfirmationRequest") == (
        200,
        b"confirmation yes",
    )
    # The target file, a non-ASCII name with a space: the link the app gives works here.
    answer = url_request(front, TARGET_IBI)
    assert answer["url"].startswith(f"{front}/col/")
    assert fetch(answer["url"]) == (200, (collection / TARGET_FILE).read_bytes())
    # A file by path, and the file list page whose links work too.
    answer = url_request(front, FILES_IBI, "&parsedibiurl.filepath=/reference.bib")
    assert fetch(answer["url"]) == (
        200,
        (collection / FILES_DIR / "doc/reference.bib").read_bytes(),
    )
    answer = url_request(front, FILES_IBI, "&parsedibiurl.verblist=GetFileList")
    status, page = fetch(answer["url"])
    assert status == 200 and answer["url"].startswith(f"{front}/{SERVICE}/filelist/")
    links = re.findall(r'href="([^"]+)"', page.decode())
    files = [link for link in links if "://" in link]
    assert files and all(link.startswith(f"{front}/col/") for link in files)
    for link in files[:1] if light else files:
        assert fetch(link)[0] == 200, link
    # The page's own links (the Archive's page, the item list, the statistics) are paths from
    # the mount point, under the service's path that every front forwards.
    pages = [link for link in links if link.startswith("/")]
    assert pages and all(link.startswith(f"/{SERVICE}/") for link in pages), pages
    for link in pages[:1] if light else pages:
        got = fetch(front + link)
        assert got[0] == 200, (link, got)
    # The health check answers through the front, under the service's path (200, or 503 with
    # the reason when, say, the front's user cannot write the state directory).
    status, body = fetch(f"{front}/{SERVICE}/health")
    assert status in (200, 503) and json.loads(body)["status"] in ("ok", "failing"), body
    # Never the sidecar, however asked.
    sidecar = [
        f"/col/{FILES_DIR}/item.yaml",
        f"/col/{FILES_DIR}/doc/%2e%2e/item.yaml",
        f"/col/{FILES_DIR}/doc/../item.yaml",
        f"/col/{FILES_DIR}/doc/..%2fitem.yaml",
        f"/col/{FILES_DIR}/",
    ]
    for path in sidecar[:2] if light else sidecar:
        status, body = fetch(front + path)
        assert status in (400, 403, 404), (path, status)
    # A client's SCRIPT_NAME header is no mount point, through any of the servers.
    request = urllib.request.Request(
        f"{front}/{SERVICE}?servicesubject=urlRequest&clientinformation.ipaddress=127.0.0.1"
        f"&parsedibiurl.ibi={TARGET_IBI}",
        headers={"SCRIPT_NAME": "/evil"},
    )
    with urllib.request.urlopen(request, timeout=20) as response:
        assert dict(pairs.parse(response.read().decode()))["url"].startswith(f"{front}/col/")
    # The protocol's own errors pass through unchanged.
    status, body = fetch(f"{front}/{SERVICE}?servicesubject=nonsense")
    assert status == 400 and body.startswith(b"error {")


class Front:
    """A real web server (apache2 or nginx) in the foreground on a free loopback port."""

    def __init__(self, command: list[str], port: int, log: Path):
        self.port, self.log = port, log
        with open(log, "wb") as out:
            self.process = subprocess.Popen(
                command, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
            )
        end = time.monotonic() + 20
        while time.monotonic() < end:
            if self.process.poll() is not None:
                raise AssertionError(f"{command[0]} exited:\n{self.logs()}")
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                return
            except OSError:
                time.sleep(0.05)
        raise AssertionError(f"{command[0]} did not listen:\n{self.logs()}")

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def logs(self) -> str:
        return "\n".join(p.read_text(errors="replace") for p in self.log.parent.glob("*.log"))

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def start_apache(public: Path, site: str, port: int, modules: list[str], extra: str = "") -> Front:
    run = public / "apache"
    run.mkdir()
    run.chmod(0o755)
    (run / "site.conf").write_text(site)
    loads = "\n".join(
        f"LoadModule {m}_module {APACHE_MODULES}/mod_{m}.so"
        for m in ["mpm_event", "authz_core", "mime", "alias", "env", *modules]
    )
    (run / "httpd.conf").write_text(f"""
ServerRoot {run}
ServerName 127.0.0.1
Listen 127.0.0.1:{port}
PidFile {run}/httpd.pid
DefaultRuntimeDir {run}
Mutex file:{run} default
ErrorLog {run}/error.log
LogLevel warn
LogFormat "%h %l %u %t \\"%r\\" %>s %b" combined
User www-data
Group www-data
TypesConfig /etc/mime.types
{loads}
Define APACHE_LOG_DIR {run}
{extra}
Include {run}/site.conf
""")
    return Front([APACHE, "-f", str(run / "httpd.conf"), "-DFOREGROUND"], port, run / "server.log")


@contextmanager
def started_fronts() -> Iterator[list]:
    """A list to append started Fronts and Serves to; each is stopped at the end."""
    started: list = []
    yield started
    for thing in started:
        thing.stop() if isinstance(thing, Front) else thing.kill()


def serve_behind(public: Path, tmp_path: Path, front_port: int, fronts: list, *args: str) -> Serve:
    """`serve` for a front web server on `front_port` (its archiveaddress), in `fronts`."""
    config = write_config(public, f"127.0.0.1:{front_port}")
    serve = Serve(tmp_path, "--archiveaddress", f"127.0.0.1:{front_port}", *args, config=config)
    fronts.append(serve)
    serve.wait_answering()
    return serve


def start_nginx(public: Path, site: str, port: int) -> Front:
    run = public / "nginx"
    run.mkdir()
    run.chmod(0o777)
    (run / "nginx.conf").write_text(f"""
daemon off;
user www-data;
worker_processes 1;
pid {run}/nginx.pid;
error_log {run}/error.log warn;
events {{ worker_connections 64; }}
http {{
    include /etc/nginx/mime.types;
    access_log {run}/access.log;
    client_body_temp_path {run}/body;
    proxy_temp_path {run}/proxy;
    fastcgi_temp_path {run}/fastcgi;
    uwsgi_temp_path {run}/uwsgi;
    scgi_temp_path {run}/scgi;
{site}
}}
""")
    return Front([NGINX, "-c", str(run / "nginx.conf"), "-p", str(run)], port, run / "server.log")
