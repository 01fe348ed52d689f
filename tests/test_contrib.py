"""contrib/: the systemd unit, the Apache and nginx configurations, the mod_wsgi and CGI entry
points. Each file is parsed and its paths matched to what the app serves; where the machine has
apache2 / nginx (Debian's packages), the real server runs the file in front of the real app."""

from __future__ import annotations

import importlib.util
import os
import re
import shlex
import shutil
import socket
import subprocess
import sys
from pathlib import Path
from urllib.parse import unquote_to_bytes, urlsplit

import pytest
import webtest
from gunicorn.config import GracefulTimeout

from archive_service import cli, settings
from archive_service.collection import items as index
from archive_service.protocol import pairs
from archive_service.protocol.answers import Links
from archive_service.serve import announce
from fronts import (
    APACHE_CGI,
    APACHE_VHOST,
    BACKEND,
    CGI_FILE,
    COLLECTION,
    CONTRIB,
    FILES_DIR,
    NGINX_SITE,
    TARGET_FILE,
    TARGET_IBI,
    WSGI_FILE,
    executable,
    rewrite,
    run_cgi,
    unit_values,
)
from resolver_double import ResolverDouble
from serve_process import ROOT, SAMPLE, SERVICE, Serve

UNIT = CONTRIB / "systemd" / "archive-service.service"
SYSCTL = CONTRIB / "sysctl" / "60-archive-service.conf"
KEY = "4445556667-7778889990"


def directives(text: str, name: str) -> list[list[str]]:
    """The arguments of every `name` directive of an Apache file (comments skipped)."""
    found = []
    for line in text.splitlines():
        words = shlex.split(line, comments=True)
        if words and words[0] == name:
            found.append(words[1:])
    return found


def sample_items() -> index.Catalog:
    return index.scan(SAMPLE)


def app_file_paths() -> list[tuple[str, str]]:
    """(URL path as the app links it, file relative to the collection) for every item file."""
    catalog = sample_items()
    links = Links("http://archive.example.org", "/" + SERVICE)
    found = []
    for item in catalog.by_directory.values():
        for rel, _ in index.list_files(catalog.root, item):
            url = links.file(item, rel)
            found.append((urlsplit(url).path, f"{item.directory}/{index.DOC}/{rel}"))
    assert len(found) > 15
    return found


def unquote_bytes(path: str) -> str:
    return os.fsdecode(unquote_to_bytes(path))


# ------------------------------------------------------------------------------- systemd


def unit() -> dict[str, list[str]]:
    return unit_values(UNIT)


def test_unit_runs_serve_in_the_foreground_as_an_unprivileged_user():
    values = unit()
    command = shlex.split(values["ExecStart"][0])
    assert Path(command[0]).name == "archive-service" and command[1] == "serve"
    args = cli.build_parser().parse_args(command[1:])
    assert args.func is cli.cmd_serve and args.config and not args.registrationkey
    assert values["User"][0] not in ("root", "0") and values["Type"] == ["notify"]
    assert values["Restart"] == ["on-failure"] and values["RestartPreventExitStatus"] == ["2"]
    assert values["StateDirectory"] == ["archive-service"]
    for hardening in (
        "ProtectSystem=strict",
        "NoNewPrivileges=yes",
        "PrivateTmp=yes",
        "ProtectHome=yes",
        "KillMode=mixed",
    ):
        key, value = hardening.split("=")
        assert values[key] == [value]
    assert values["ReadOnlyPaths"] == [COLLECTION]


def test_unit_stop_timeout_covers_workers_and_exclusion():
    values = unit()
    stop = float(values["TimeoutStopSec"][0])
    exclusion = settings.BY_NAME["exclusion_timeout"].default
    # gunicorn waits graceful_timeout for the workers, then on_exit stops the announcer
    # (at most 2 s) and waits exclusion_timeout for the resolver.
    assert stop > GracefulTimeout.default + 2 + exclusion


def test_unit_hands_the_key_over_as_a_credential():
    [credential] = unit()["LoadCredential"]
    name, _, source = credential.partition(":")
    assert name == announce.CREDENTIAL and source.startswith("/etc/")


@pytest.mark.process
@pytest.mark.skipif(not executable("systemd-analyze"), reason="systemd-analyze not installed")
def test_unit_passes_systemd_analyze_verify(tmp_path):
    command = shlex.split(unit()["ExecStart"][0])
    copy = tmp_path / "archive-service.service"
    # verify checks that the program exists; stand in for the venv's console script.
    copy.write_text(rewrite(UNIT.read_text(), (command[0], shutil.which("true") or "/bin/true")))
    result = subprocess.run(
        ["systemd-analyze", "verify", str(copy)], capture_output=True, text=True, cwd=tmp_path
    )
    assert result.returncode == 0 and not result.stderr.strip(), result.stderr


@pytest.mark.process
def test_serve_as_the_unit_runs_it(tmp_path):
    """What systemd gives the service: NOTIFY_SOCKET (Type=notify), CREDENTIALS_DIRECTORY
    (LoadCredential=), STATE_DIRECTORY (StateDirectory=); KillSignal SIGTERM on stop."""
    notify = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    notify.bind(str(tmp_path / "notify"))
    notify.settimeout(30)
    credentials = tmp_path / "credentials"
    credentials.mkdir(mode=0o700)
    (credentials / "registrationkey").write_text(KEY)
    (credentials / "registrationkey").chmod(0o400)
    resolver = ResolverDouble().start()
    config = tmp_path / "archive-service.yaml"
    config.write_text(
        f"collection: {SAMPLE}\narchiveserviceibi: {SERVICE}\n"
        f"resolver: {resolver.url}\narchiveip: 127.0.0.1\n"
        "archiveadmemailaddress: admin@example.org\n"
    )
    config.chmod(0o640)
    command = shlex.split(unit()["ExecStart"][0])
    assert command[2:4] == ["--config", "/etc/archive-service/archive-service.yaml"]
    serve = Serve(
        tmp_path,
        config=config,
        env={
            "NOTIFY_SOCKET": str(tmp_path / "notify"),
            "CREDENTIALS_DIRECTORY": str(credentials),
            "STATE_DIRECTORY": str(tmp_path / "state"),
        },
    )
    try:
        message = notify.recv(1024).decode()
        assert "READY=1" in message.splitlines()
        [inclusion] = resolver.wait_for(1, "inclusionRequest")
        assert inclusion.pairs["registrationkey"] == KEY
        assert inclusion.confirmation == "confirmation yes"
        assert serve.stop(float(unit()["TimeoutStopSec"][0])) == 0
        assert resolver.subjects() == ["inclusionRequest", "exclusionRequest"]
        assert KEY not in serve.log()
    finally:
        serve.kill()
        resolver.stop()
        notify.close()


# ------------------------------------------------------------------- paths, without servers


def test_apache_vhost_proxies_the_service_path_unchanged():
    text = APACHE_VHOST.read_text()
    [[path, target, *flags], [col, col_target, *col_flags]] = directives(text, "ProxyPass")
    assert path == "/" + SERVICE and target == f"http://{BACKEND}/{SERVICE}"
    assert "nocanon" not in flags  # ASCII paths; with a query Apache ignores it (AH01136)
    assert directives(text, "ProxyPassReverse") == [[path, target]]
    # /col/ too: the service enforces licensed items on every file request.
    assert (col, col_target, col_flags) == ("/col/", f"http://{BACKEND}/col/", ["nocanon"])
    assert settings.BY_NAME["bind"].default == BACKEND


def apache_alias_alternative() -> str:
    """The commented block of the Apache vhost that serves /col/ from disk instead."""
    lines = re.findall(r"^    #   (.*)$", APACHE_VHOST.read_text(), re.MULTILINE)
    assert lines, "the commented AliasMatch block is gone"
    return "".join(f"    {line}\n" for line in lines)


def test_apache_alias_maps_exactly_the_files_the_app_links():
    [[pattern, target]] = directives(apache_alias_alternative(), "AliasMatch")
    assert target == COLLECTION + "/$1"
    regex = re.compile(pattern)
    for url_path, on_disk in app_file_paths():
        match = regex.match(unquote_bytes(url_path))
        assert match and match.group(1) == on_disk, url_path
        assert (SAMPLE / on_disk).is_file()
    for item in sample_items().by_directory.values():
        for outside in (
            f"/col/{item.directory}/item.yaml",
            f"/col/{item.directory}/",
            f"/col/{item.directory}/doc/",
        ):
            assert not regex.match(outside), outside


def cgi_route(text: str, path: str) -> str | None:
    """The PATH_INFO Apache hands the CGI program for `path` (decoded), or None when the CGI
    site's ScriptAlias and ScriptAliasMatch lines do not route it (mod_alias: a prefix ends
    at a segment boundary; the first matching line wins)."""
    for alias, target in directives(text, "ScriptAlias"):
        if path == alias or path.startswith(alias.rstrip("/") + "/"):
            assert target.startswith(CGI_PROGRAM)
            return target[len(CGI_PROGRAM) :] + path[len(alias) :]
    for pattern, target in directives(text, "ScriptAliasMatch"):
        if match := re.match(pattern, path):
            assert target.startswith(CGI_PROGRAM)
            return match.expand(target[len(CGI_PROGRAM) :].replace("$1", r"\1"))
    return None


CGI_PROGRAM = "/usr/lib/cgi-bin/archive-service.cgi"


def test_apache_cgi_routes_the_service_col_and_the_root_to_the_app():
    text = APACHE_CGI.read_text()
    item_dir = FILES_DIR
    for path in (
        f"/{SERVICE}",
        f"/{SERVICE}/filelist/{item_dir}",
        f"/{SERVICE}/metadata/{item_dir}",
        "/",
        "/robots.txt",
        *(unquote_bytes(p) for p, _ in app_file_paths()),
    ):
        assert cgi_route(text, path) == path, path
    for path in ("/index.html", f"/{SERVICE}x", "/col", "/cgi-bin/x"):
        assert cgi_route(text, path) is None, path


def test_apache_cgi_replacing_the_service_ibi_as_documented_leaves_none_behind():
    """The file's steps say to replace the sample's service IBI by one's own: every route of
    the service must then name the new one (a regex-escaped spelling was missed: 404)."""
    mine = "archive.example.edu/repositorio/2026/11.27.10.21"
    text = APACHE_CGI.read_text().replace(SERVICE, mine)
    assert "sid" not in text.replace("# ", "").split("<VirtualHost")[1], "a spelling was missed"
    assert cgi_route(text, f"/{mine}/filelist/x") == f"/{mine}/filelist/x"
    assert cgi_route(text, f"/{SERVICE}") is None


def test_apache_and_nginx_proxies_route_the_root_and_robots_to_the_archive():
    [[pattern, target]] = directives(APACHE_VHOST.read_text(), "ProxyPassMatch")
    for path in ("/", "/robots.txt"):
        match = re.match(pattern, path)
        assert match and match.expand(target.replace("$1", r"\1")) == f"http://{BACKEND}{path}"
    assert not re.match(pattern, "/index.html")
    live = "\n".join(
        line for line in NGINX_SITE.read_text().splitlines() if not line.lstrip().startswith("#")
    )
    locations = re.findall(r"location\s+(=|\^~)\s+(\S+)\s*\{", live)
    assert ("=", "/") in locations and ("=", "/robots.txt") in locations


def test_nginx_locations_cover_the_service_and_col():
    text = NGINX_SITE.read_text()
    live = "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("#"))
    locations = re.findall(r"location\s+(=|\^~)\s+(\S+)\s*\{", live)
    assert ("=", "/" + SERVICE) in locations and ("^~", f"/{SERVICE}/") in locations
    assert ("^~", "/col/") in locations
    assert f"server {BACKEND};" in live and "proxy_pass http://archive_service;" in live


def test_sysctl_file_sets_real_keys_and_lets_a_million_items_be_watched():
    values = {}
    for line in SYSCTL.read_text().splitlines():
        line = line.strip()
        if not line or line.startswith(("#", ";")):
            continue
        key, sep, value = line.partition("=")
        assert sep, f"not key = value: {line!r}"
        values[key.strip()] = value.strip()
    for key in values:
        assert Path("/proc/sys", *key.split(".")).exists(), f"no such kernel setting {key}"
    # The indexer asks for twice the directories it counted (indexer/watch.py); bench/gen.py's
    # million-item collection has 1,984,417.
    assert int(values["fs.inotify.max_user_watches"]) >= 2 * 1_984_417


@pytest.mark.process
def test_wsgi_file_builds_the_app_mounted_at_root(monkeypatch):
    monkeypatch.setenv("ARCHIVE_SERVICE_CONFIG", str(SAMPLE / "archive-service.yaml"))
    assert cli.main(["index", "--config", str(SAMPLE / "archive-service.yaml")]) == 0
    spec = importlib.util.spec_from_loader("archive_service_wsgi", loader=None)
    module = importlib.util.module_from_spec(spec)
    exec(compile(WSGI_FILE.read_text(), str(WSGI_FILE), "exec"), module.__dict__)
    # WSGIScriptAlias / gives SCRIPT_NAME "" and the whole path in PATH_INFO.
    app = webtest.TestApp(module.application, extra_environ={"SCRIPT_NAME": ""})
    assert (
        app.get(f"/{SERVICE}?servicesubject=inclusionConfirmationRequest").text
        == "confirmation yes"
    )
    answer = dict(
        pairs.parse(
            app.get(
                f"/{SERVICE}?servicesubject=urlRequest&clientinformation.ipaddress=127.0.0.1"
                f"&parsedibiurl.ibi={TARGET_IBI}"
            ).text
        )
    )
    url = urlsplit(answer["url"])
    assert url.path.startswith("/col/")
    assert app.get(url.path).body == (SAMPLE / TARGET_FILE).read_bytes()
    # Mounted elsewhere (WSGIScriptAlias /archive), routes and links follow the mount point.
    mounted = webtest.TestApp(module.application, extra_environ={"SCRIPT_NAME": "/archive"})
    answer = dict(
        pairs.parse(
            mounted.get(
                f"/{SERVICE}?servicesubject=urlRequest&clientinformation.ipaddress=127.0.0.1"
                f"&parsedibiurl.ibi={TARGET_IBI}"
            ).text
        )
    )
    assert urlsplit(answer["url"]).path.startswith("/archive/col/")


@pytest.mark.process
def test_cgi_file_runs_the_app_through_wsgiref(tmp_path):
    assert CGI_FILE.stat().st_mode & 0o111, "the CGI program must be executable"
    config = tmp_path / "archive-service.yaml"
    config.write_text(
        (SAMPLE / "archive-service.yaml").read_text().replace(".  ", f"{SAMPLE}  ", 1)
        + f"state_dir: {tmp_path / 'state'}\n"
    )
    # What archive-service-indexer.service keeps current; the program reads it as it stands.
    assert cli.main(["index", "--config", str(config)]) == 0
    head, body = run_cgi(f"/{SERVICE}", "servicesubject=inclusionConfirmationRequest", config)
    assert head.startswith("Status: 200") and body == b"confirmation yes"
    # PATH_INFO as Apache hands it over: the percent-decoded bytes of the file name.
    head, body = run_cgi(b"/col/" + os.fsencode(TARGET_FILE), config=config)
    assert head.startswith("Status: 200"), head
    assert body == (SAMPLE / TARGET_FILE).read_bytes()
    head, body = run_cgi(f"/col/{FILES_DIR}/item.yaml", config=config)
    assert head.startswith("Status: 404")
    head, body = run_cgi(f"/{SERVICE}", "servicesubject=nonsense", config)
    assert head.startswith("Status: 400") and body.startswith(b"error {")


@pytest.mark.process
def test_cgi_file_with_unreadable_settings_says_so_in_one_line(tmp_path):
    """A CGI program whose settings cannot be read (the web server's user may not read them)
    answers 500 and leaves one line in Apache's error log, not a traceback per request."""
    errors: list[str] = []
    missing = tmp_path / "archive-service.yaml"
    head, body = run_cgi(f"/{SERVICE}", "servicesubject=urlRequest", missing, errors)
    assert head.startswith("Status: 500"), head
    assert errors == [f"archive-service.cgi: config file {missing}: No such file or directory"]


@pytest.mark.process
def test_wsgi_file_with_unreadable_settings_says_so_in_one_line(tmp_path):
    """As the CGI program: a mod_wsgi daemon whose settings cannot be read logs one line and
    answers 500 (a traceback in Apache's error log at every request before: mod_wsgi imports
    a failed script file again for each)."""
    missing = tmp_path / "archive-service.yaml"
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            "import runpy, wsgiref.util as u\n"
            f"app = runpy.run_path({str(WSGI_FILE)!r})['application']\n"
            "environ = {'REQUEST_METHOD': 'GET', 'PATH_INFO': '/'}\n"
            "u.setup_testing_defaults(environ)\n"
            "print(b''.join(app(environ, lambda status, headers: print(status))).decode())",
        ],
        env={**os.environ, "ARCHIVE_SERVICE_CONFIG": str(missing), "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr.splitlines() == [
        f"archive-service.wsgi: config file {missing}: No such file or directory"
    ]
    assert done.stdout.startswith("500 Internal Server Error\n"), done.stdout


# ---------------------------------------------------------------------------- real servers
