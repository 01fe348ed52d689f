"""The real front web servers of contrib/ (Debian's apache2 and nginx), started as Debian
starts them on private copies of their configuration and on free loopback ports, in front of
the real `serve`, and what a resolver and a browser check through them."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from archive_service.protocol import pairs
from serve_process import ROOT, SAMPLE, SERVICE, Serve, children

CONTRIB = ROOT / "contrib"
APACHE_VHOST = CONTRIB / "apache" / "archive-service.conf"
NGINX_SITE = CONTRIB / "nginx" / "archive-service.conf"
APACHE_WSGI = CONTRIB / "apache" / "archive-service-wsgi.conf"
WSGI_FILE = CONTRIB / "apache" / "archive-service.wsgi"
APACHE_CGI = CONTRIB / "apache" / "archive-service-cgi.conf"
CGI_FILE = CONTRIB / "apache" / "archive-service.cgi"
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


def unit_values(path: Path) -> dict[str, list[str]]:
    """A systemd unit file's settings: each key's values in order."""
    values: dict[str, list[str]] = {}
    for line in path.read_text().splitlines():
        if line.strip() and not line.startswith(("#", ";", "[")):
            key, _, value = line.partition("=")
            values.setdefault(key.strip(), []).append(value.strip())
    return values


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


def write_config(public: Path, address: str, state_dir: Path | None = None) -> Path:
    config = public / "archive-service.yaml"
    config.write_text(
        f"collection: {public / 'collection'}\narchiveaddress: {address}\n"
        f"archiveserviceibi: {SERVICE}\nplatformsoftware: dpi.inpe.br/banon/1998/08.02.08.56\n"
        "resolver: none\n" + (f"state_dir: {state_dir}\n" if state_dir else "")
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
    absolute = [link for link in links if "://" in link]
    files = [link for link in absolute if link.startswith(f"{front}/col/")]
    # Besides the files, the item's landing page (issue 32), which works through the front.
    (landing,) = [link for link in absolute if link not in files]
    assert files and landing.startswith(f"{front}/{SERVICE}/item/")
    assert fetch(landing)[0] == 200
    for link in files[:1] if light else files:
        assert fetch(link)[0] == 200, link
    # The page's own links (the Archive's page, the item list, the statistics) are paths from
    # the mount point, under the service's path that every front forwards.
    pages = [link for link in links if link.startswith("/")]
    assert pages and all(link.startswith(f"/{SERVICE}/") for link in pages), pages
    for link in pages[:1] if light else pages:
        got = fetch(front + link)
        assert got[0] == 200, (link, got)
    # The site's root is the Archive's page, not the web server's default page.
    status, page = fetch(f"{front}/")
    assert status == 200 and SERVICE.encode() in page, (status, page[:300])
    assert b"Default Page" not in page and b"Welcome to nginx" not in page
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
    """A real web server (apache2 or nginx) on a free loopback port, started as a daemon the
    way Debian starts it; `run` holds its pid file and logs."""

    port: int
    run: Path
    pid_file: Path

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def logs(self) -> str:
        return "\n".join(p.read_text(errors="replace") for p in sorted(self.run.rglob("*.log")))

    @contextmanager
    def explained(self) -> Iterator[None]:
        """A failed check says what the server's logs said."""
        try:
            yield
        except AssertionError as exc:
            raise AssertionError(f"{exc}\n--- server logs:\n{self.logs()[-6000:]}") from exc

    def _daemon(self, command: list[str], env: dict[str, str]) -> None:
        """Run the command that starts the daemon, then wait until it listens."""
        done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, f"{command}: {done.stdout}{done.stderr}\n{self.logs()}"
        end = time.monotonic() + 20
        while time.monotonic() < end:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return
            except OSError:
                time.sleep(0.05)
        raise AssertionError(f"{command[0]} did not listen:\n{self.logs()}")

    def pid(self) -> int | None:
        try:
            return int(self.pid_file.read_text())
        except (OSError, ValueError):
            return None

    def _stopped(self, pid: int) -> None:
        """Wait for the daemon `pid` to be gone (it is no child of ours), killing it late."""
        end = time.monotonic() + 15
        while os.path.exists(f"/proc/{pid}") and time.monotonic() < end:
            time.sleep(0.05)
        if os.path.exists(f"/proc/{pid}"):
            os.killpg(pid, signal.SIGKILL)  # a daemon leads its own session and group

    def stop(self) -> None:
        raise NotImplementedError


@contextmanager
def started_fronts() -> Iterator[list]:
    """A list to append started Fronts and Serves to; each is stopped at the end, the last
    started first (a front before the serve behind it)."""
    started: list = []
    yield started
    for thing in reversed(started):
        thing.stop() if isinstance(thing, Front) else thing.kill()


def serve_behind(public: Path, tmp_path: Path, front_port: int, fronts: list, *args: str) -> Serve:
    """`serve` for a front web server on `front_port` (its archiveaddress), in `fronts`."""
    config = write_config(public, f"127.0.0.1:{front_port}")
    serve = Serve(tmp_path, "--archiveaddress", f"127.0.0.1:{front_port}", *args, config=config)
    fronts.append(serve)
    serve.wait_answering()
    return serve


def debian_python_site(public: Path) -> tuple[str, Path]:
    """Debian's python3 (the one mod_wsgi is built for) and a world-readable copy of our package
    and its dependencies, since this machine's own Python may be private to root."""
    python = "/usr/bin/python3"
    if not os.access(python, os.X_OK):
        pytest.skip("no /usr/bin/python3 (Debian's Python) for CGI and mod_wsgi")
    version = subprocess.run(
        [python, "-c", "import sys; print(sys.version_info[:2])"], capture_output=True, text=True
    ).stdout.strip()
    if version != str(sys.version_info[:2]):
        pytest.skip(
            f"Debian's python3 is {version}, the tests run {sys.version_info[:2]}: "
            "the dependencies cannot be shared"
        )
    site = public / "site"
    shutil.copytree(
        ROOT / "archive_service",
        site / "archive_service",
        ignore=shutil.ignore_patterns("__pycache__"),
    )
    for name in (
        "flask",
        "werkzeug",
        "jinja2",
        "markupsafe",
        "itsdangerous",
        "click",
        "blinker",
        "yaml",
        "_yaml",
        "watchdog",
        "inotify_simple",
        "counter_robots",
        # The pages' languages (Flask-Babel, Babel) and the landing pages' citations.
        "flask_babel",
        "babel",
        "pytz",
        "citeproc",
        "rispy",
        "lxml",
        # `serve` under the unit of README's ten steps (tests/test_readme_production.py).
        "gunicorn",
        "packaging",
        # GET /metrics (issue 36).
        "prometheus_client",
    ):
        spec = importlib.util.find_spec(name)
        if spec is None:
            continue
        if spec.submodule_search_locations:
            shutil.copytree(
                list(spec.submodule_search_locations)[0],
                site / name,
                ignore=shutil.ignore_patterns("__pycache__"),
            )
        else:
            shutil.copy(spec.origin, site)
    # As pip would: the unprivileged user cannot write __pycache__, and CGI imports every time.
    subprocess.run([python, "-m", "compileall", "-q", str(site)], check=True)
    for directory, dirs, files in os.walk(site):
        for name in dirs:
            os.chmod(os.path.join(directory, name), 0o755)
        for name in files:
            os.chmod(os.path.join(directory, name), 0o644)
    check = subprocess.run(
        [python, "-c", "import archive_service.web.app"],
        user="www-data",
        env={"PYTHONPATH": str(site)},
        capture_output=True,
        text=True,
    )
    if check.returncode:
        pytest.skip(f"Debian's python3 cannot import the app: {check.stderr.strip()[-200:]}")
    return python, site


APACHE2CTL = executable("apache2ctl")
DEBIAN_APACHE = Path("/etc/apache2")
needs_debian_apache = pytest.mark.skipif(
    APACHE2CTL is None or not (DEBIAN_APACHE / "envvars").is_file(),
    reason="Debian's apache2 layout is not installed (apache2ctl, /etc/apache2/envvars)",
)
# The environment systemd gives apache2.service (Environment=APACHE_STARTED_BY_SYSTEMD=true)
# on a box whose locale is UTF-8: envvars then sets LANG=C, as it does there.
SYSTEMD_ENV = {
    "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    "LANG": "C.UTF-8",
    "APACHE_STARTED_BY_SYSTEMD": "true",
}


class DebianApache(Front):
    """apache2 started as Debian starts it: `apache2ctl start` sources envvars (LANG=C,
    www-data) and daemonizes, reading a private copy of /etc/apache2 (APACHE_CONFDIR) whose
    sites and modules are enabled with a2ensite / a2enmod, as contrib's steps say. Only the
    copy's envvars paths (run, lock and log directories) and ports.conf are changed."""

    def __init__(self, public: Path, port: int):
        self.port = port
        self.confdir = public / "apache2"
        shutil.copytree(DEBIAN_APACHE, self.confdir, symlinks=True)
        self.run = public / "apache2-run"
        for sub in ("run", "lock", "log", "state"):
            (self.run / sub).mkdir(parents=True)
        self.run.chmod(0o755)
        envvars = self.confdir / "envvars"
        text = rewrite(
            envvars.read_text(),
            ("/var/run/apache2$SUFFIX/apache2.pid", f"{self.run}/run/apache2.pid"),
            ("/var/run/apache2$SUFFIX", f"{self.run}/run"),
            ("/var/lock/apache2$SUFFIX", f"{self.run}/lock"),
            ("/var/log/apache2$SUFFIX", f"{self.run}/log"),
        )
        assert "\nexport LANG=C\n" in text, "Debian's envvars no longer sets LANG=C"
        envvars.write_text(text)
        (self.confdir / "ports.conf").write_text(f"Listen 127.0.0.1:{port}\n")
        # mod_wsgi's sockets go to /var/run/apache2 by default: here, the private run dir.
        (self.confdir / "conf-available" / "test-run-dir.conf").write_text(
            "<IfModule mod_wsgi.c>\n    WSGISocketPrefix ${APACHE_RUN_DIR}/wsgi\n</IfModule>\n"
        )
        self.env = {
            **SYSTEMD_ENV,
            "APACHE_CONFDIR": str(self.confdir),
            "APACHE_STATE_DIRECTORY": str(self.run / "state"),
        }
        self.pid_file = self.run / "run" / "apache2.pid"
        self.a2("a2enconf", "test-run-dir")
        self.a2("a2dissite", "000-default")

    def a2(self, *command: str) -> None:
        """An a2enmod / a2ensite / ... step, on the private copy."""
        done = subprocess.run(command, env=self.env, capture_output=True, text=True)
        assert done.returncode == 0, f"{command}: {done.stdout}{done.stderr}"

    def install_site(self, name: str, text: str) -> None:
        """contrib's steps: copy the file into sites-available, then a2ensite."""
        (self.confdir / "sites-available" / f"{name}.conf").write_text(text)
        self.a2("a2ensite", name)

    def start(self) -> DebianApache:
        self._daemon([APACHE2CTL, "start"], self.env)
        return self

    def stop(self) -> None:
        pid = self.pid()
        if pid is not None:
            subprocess.run([APACHE2CTL, "stop"], env=self.env, capture_output=True, timeout=60)
            self._stopped(pid)

    def reload(self) -> None:
        """`systemctl reload apache2`: Debian's unit's ExecReload, `apachectl graceful`; done
        when the error log says Apache resumed once more."""
        log = self.run / "log" / "error.log"
        resumed = log.read_text(errors="replace").count("resuming normal operations")
        done = subprocess.run(
            [APACHE2CTL, "graceful"], env=self.env, capture_output=True, text=True, timeout=60
        )
        assert done.returncode == 0, f"apache2ctl graceful: {done.stdout}{done.stderr}"
        end = time.monotonic() + 20
        while log.read_text(errors="replace").count("resuming normal operations") <= resumed:
            assert time.monotonic() < end, f"apache2 did not reload:\n{self.logs()}"
            time.sleep(0.05)

    def restart(self) -> None:
        """`systemctl restart apache2`: the unit's ExecStop, then its ExecStart."""
        self.stop()
        self.start()


def acknowledge(front: str, answer: dict[str, str]) -> None:
    """What a resolver sends back after handing a user `answer`'s URL (SPEC: acknowledgment)."""
    query = urllib.parse.urlencode(
        {
            "servicesubject": "acknowledgment",
            "clientinformation.ipaddress": "150.163.2.175",
            "contenttype": answer["contenttype"],
            "ibi": answer["ibi"].strip("{}"),
            "state": answer["state"],
            "url": answer["url"],
            "url.persistent": f"http://urlib.net/{TARGET_IBI}",
            "urlkey": answer["urlkey"],
        },
        quote_via=urllib.parse.quote,
    )
    assert fetch(f"{front}/{SERVICE}?{query}") == (200, b"notice {acknowledgment received}")


def cli_as(user: str, python: str, site: Path, config: Path, *command: str) -> str:
    """An `archive-service` command as `user` (the web server's), with the config the web
    server reads, as an admin runs it by hand or a systemd unit as that user: its output."""
    done = subprocess.run(
        ["runuser", "-u", user, "--", python, "-m", "archive_service.cli", *command]
        + ["--config", str(config)],
        env={"PATH": SYSTEMD_ENV["PATH"], "PYTHONPATH": str(site), "LANG": "C.UTF-8"},
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def stats_as(user: str, python: str, site: Path, config: Path) -> dict:
    """`archive-service stats --format json` as `user`: what the service counted."""
    return json.loads(cli_as(user, python, site, config, "stats", "--format", "json"))


def indexed_for_cgi(folder: Path, collection: Path = SAMPLE):
    """The sample's settings over `collection` (state_dir in `folder`) with its index built,
    and the WebTest app create_app makes of them as CGI and mod_wsgi make it (no walk): what
    a CGI answer is compared with."""
    import webtest

    from archive_service import cli, settings
    from archive_service.web import create_app

    config = folder / "archive-service.yaml"
    config.write_text(
        (SAMPLE / "archive-service.yaml").read_text().replace(".  ", f"{collection}  ", 1)
        + f"state_dir: {folder / 'state'}\n"
    )
    assert cli.main(["index", "--config", str(config)]) == 0
    app = create_app(settings.load(str(config)), refresh=False)
    return config, webtest.TestApp(app, extra_environ={"SCRIPT_NAME": ""})


def run_cgi(
    path_info: str | bytes,
    query: str = "",
    config: Path = SAMPLE / "archive-service.yaml",
    errors: list[str] | None = None,
    method: str = "GET",
    python: tuple[str, ...] = (),
    meta: dict[str, str] | None = None,
) -> tuple[str, bytes]:
    """The CGI program's head and body for one request; its stderr lines go to `errors`.
    `python`: options of the interpreter (`-X importtime`); `meta`: more meta-variables
    (HTTP_RANGE, HTTP_IF_NONE_MATCH)."""
    environ = {
        "REQUEST_METHOD": method,
        "SCRIPT_NAME": "",
        "PATH_INFO": path_info,
        "QUERY_STRING": query,
        "SERVER_NAME": "archive.example.org",
        "SERVER_PORT": "80",
        "SERVER_PROTOCOL": "HTTP/1.1",
        "GATEWAY_INTERFACE": "CGI/1.1",
        "ARCHIVE_SERVICE_CONFIG": str(config),
        "PYTHONPATH": str(ROOT),
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        **(meta or {}),
    }
    done = subprocess.run(
        [sys.executable, *python, str(CGI_FILE)], env=environ, capture_output=True, timeout=60
    )
    assert done.returncode == 0, done.stderr.decode()
    if errors is not None:
        errors += done.stderr.decode().splitlines()
    head, _, body = done.stdout.partition(b"\r\n\r\n")
    return head.decode("latin-1"), body


WEB_USER = "www-data"  # Debian's web server user
needs_mod_wsgi = pytest.mark.skipif(
    not (APACHE_MODULES / "mod_wsgi.so").exists(),
    reason="mod_wsgi is not installed (Debian: apt-get install libapache2-mod-wsgi-py3)",
)


DEBIAN_NGINX = Path("/etc/nginx")
needs_debian_nginx = pytest.mark.skipif(
    NGINX is None or not (DEBIAN_NGINX / "nginx.conf").is_file(),
    reason="Debian's nginx layout is not installed (nginx, /etc/nginx/nginx.conf)",
)


class DebianNginx(Front):
    """nginx started as Debian's nginx.service starts it (`nginx -g 'daemon on; master_process
    on;'`, Debian's nginx.conf: www-data, sites-enabled), on a private copy of /etc/nginx
    whose pid, log and temporary paths are private and whose default site is removed (or,
    `keep_default`, kept on the test's port)."""

    def __init__(self, public: Path, port: int, keep_default: bool = False):
        self.port = port
        self.etc = public / "nginx-etc"
        shutil.copytree(DEBIAN_NGINX, self.etc, symlinks=True)
        self.run = public / "nginx-run"
        self.run.mkdir(mode=0o755)
        self.pid_file = self.run / "nginx.pid"
        conf = self.etc / "nginx.conf"
        conf.write_text(
            rewrite(
                conf.read_text(),
                ("pid /run/nginx.pid;", f"pid {self.pid_file};"),
                ("/var/log/nginx/", f"{self.run}/"),
                ("include /etc/nginx/", f"include {self.etc}/"),
            )
        )
        (self.etc / "conf.d" / "test-temp.conf").write_text(
            "".join(
                f"{kind}_temp_path {self.run}/{kind};\n"
                for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")
            )
        )
        default = self.etc / "sites-enabled" / "default"
        if keep_default:  # as apt-get leaves it: the default site, here on the test's port
            text = (self.etc / "sites-available" / "default").read_text()
            default.unlink()
            default.write_text(
                rewrite(
                    text,
                    ("listen 80 default_server;", f"listen 127.0.0.1:{port} default_server;"),
                    ("listen [::]:80 default_server;", ""),
                )
            )
        else:
            default.unlink(missing_ok=True)

    def install_site(self, name: str, text: str) -> None:
        """contrib's steps: copy into sites-available, link from sites-enabled."""
        (self.etc / "sites-available" / name).write_text(text)
        (self.etc / "sites-enabled" / name).symlink_to(f"../sites-available/{name}")

    def start(self) -> DebianNginx:
        self._daemon(self.command(), SYSTEMD_ENV)
        return self

    def command(self, *args: str) -> list[str]:
        """nginx's command line as nginx.service gives it, on the private copy."""
        conf = str(self.etc / "nginx.conf")
        return [NGINX, "-c", conf, "-g", "daemon on; master_process on;", *args]

    def check(self) -> None:
        """`nginx -t`, as nginx.service's ExecStartPre runs it."""
        done = subprocess.run(self.command("-t", "-q"), capture_output=True, text=True)
        assert done.returncode == 0, f"nginx -t: {done.stdout}{done.stderr}"

    def reload(self) -> None:
        """`systemctl reload nginx` (`nginx -s reload`): done when the master's workers are
        all new ones (those of the configuration read again; an old one still answers)."""
        pid = self.pid()
        old = set(children(pid))
        done = subprocess.run(self.command("-s", "reload"), capture_output=True, text=True)
        assert done.returncode == 0, f"nginx -s reload: {done.stdout}{done.stderr}"
        end = time.monotonic() + 20
        while (now := set(children(pid))) & old or not now:
            assert time.monotonic() < end, f"nginx did not reload:\n{self.logs()}"
            time.sleep(0.05)

    def stop(self) -> None:
        pid = self.pid()
        if pid is not None:
            os.kill(pid, signal.SIGQUIT)  # as nginx.service's ExecStop
            self._stopped(pid)


def start_debian_apache(
    fronts: list, public: Path, port: int, site: str, *modules: str, name: str = "archive-service"
) -> DebianApache:
    """Debian's apache2 with `modules` and the site `name` enabled, started (in `fronts`)."""
    fronts.append(apache := DebianApache(public, port))
    if modules:
        apache.a2("a2enmod", *modules)
    apache.install_site(name, site)
    return apache.start()


def state_dir_of(public: Path, user: str = WEB_USER) -> Path:
    """The state directory contrib's steps make for the web server's user."""
    state = public / "state"
    state.mkdir(mode=0o700)
    shutil.chown(state, user, user)
    return state


def start_mod_wsgi(
    fronts: list,
    public: Path,
    port: int,
    config: Path,
    site: Path,
    user: tuple[str, str] = (WEB_USER, WEB_USER),
) -> DebianApache:
    """contrib's mod_wsgi site and .wsgi file in Debian's apache2, started."""
    wsgi = public / "wsgi" / "archive-service.wsgi"
    wsgi.parent.mkdir(mode=0o755)
    wsgi.write_text(
        rewrite(WSGI_FILE.read_text(), ("/etc/archive-service/archive-service.yaml", str(config)))
    )
    wsgi.chmod(0o644)
    conf = rewrite(
        APACHE_WSGI.read_text(),
        ("*:80", f"*:{port}"),
        ("user=archive-service group=archive-service", "user={} group={}".format(*user)),
        ("python-home=/opt/archive-service/venv", f"python-path={site}"),
        (" home=/opt/archive-service ", f" home={wsgi.parent} "),
        ("/opt/archive-service/archive-service.wsgi", str(wsgi)),
        ('<Directory "/opt/archive-service">', f'<Directory "{wsgi.parent}">'),
    )
    return start_debian_apache(fronts, public, port, conf, "wsgi", name="archive-service-wsgi")


def start_cgi(
    fronts: list, public: Path, port: int, config: Path, python: str, site: Path
) -> DebianApache:
    """contrib's CGI site and program in Debian's apache2 (mod_cgid, www-data), started."""
    program = public / "cgi-bin" / "archive-service.cgi"
    program.parent.mkdir(mode=0o755)
    program.write_text(
        rewrite(CGI_FILE.read_text(), ("#!/opt/archive-service/venv/bin/python3", f"#!{python}"))
    )
    program.chmod(0o755)
    config_line = f"SetEnv ARCHIVE_SERVICE_CONFIG {config}"
    site_conf = rewrite(
        APACHE_CGI.read_text(),
        ("*:80", f"*:{port}"),
        ("/usr/lib/cgi-bin", str(program.parent)),
        ("SetEnv ARCHIVE_SERVICE_CONFIG /etc/archive-service/archive-service.yaml", config_line),
        # The venv's Python finds the package itself; Debian's needs the copied site.
        (config_line, f"{config_line}\n    SetEnv PYTHONPATH {site}"),
    )
    # Debian's `a2enmod cgi` picks cgid under its threaded MPM (event).
    return start_debian_apache(fronts, public, port, site_conf, "cgid", name="archive-service-cgi")


def start_debian_nginx(fronts: list, public: Path, port: int, site: str) -> DebianNginx:
    """Debian's nginx with the site enabled, started (in `fronts`)."""
    fronts.append(nginx := DebianNginx(public, port))
    nginx.install_site("archive-service.conf", site)
    return nginx.start()
