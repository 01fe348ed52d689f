"""contrib/'s variants (Apache proxy, mod_wsgi, CGI; nginx) in Debian's own apache2 and
nginx, started as Debian starts them (apache2ctl sourcing /etc/apache2/envvars: LANG=C,
www-data; `nginx -g 'daemon on; master_process on;'`) and running before the admin starts, as
apt-get leaves them. Each file's own steps (its `#   $ ` lines, tests/recipes.py) are run in
order, verbatim but for the declared substitutions of recipes.machine (Debian's paths to the
test's copies, the example host to the front's loopback address, `systemctl` to the
launcher's reload, restart and units); a step nothing maps fails ("unmapped step"). Then what
a resolver and a browser do through the front is checked, with non-ASCII file names and
acknowledgments counted in the statistics."""

from __future__ import annotations

import re
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from archive_service.stores import stats
from fronts import (
    APACHE_CGI,
    APACHE_VHOST,
    APACHE_WSGI,
    BACKEND,
    COLLECTION,
    CONTRIB,
    NGINX_SITE,
    TARGET_IBI,
    WEB_USER,
    DebianApache,
    DebianNginx,
    Front,
    acknowledge,
    check_front,
    cli_as,
    debian_python_site,
    fetch,
    needs_debian_apache,
    needs_debian_nginx,
    needs_mod_wsgi,
    rewrite,
    serve_behind,
    start_debian_apache,
    start_debian_nginx,
    start_mod_wsgi,
    stats_as,
    url_request,
    write_config,
)
from recipes import AS_THEY_ARE, Runner, Units, comment_steps, debian_venv, machine, shell
from serve_process import SERVICE, free_port, wait_until


@pytest.mark.parametrize("conf", sorted((CONTRIB / "apache").glob("*.conf")), ids=lambda p: p.name)
def test_apache_steps_copy_the_file_into_sites_available_before_a2ensite(conf):
    steps = [line.strip("# ") for line in conf.read_text().splitlines() if line.startswith("#")]
    text = "\n".join(steps)
    copy = text.find(f"cp {conf.name} /etc/apache2/sites-available/")
    enable = text.find(f"a2ensite {conf.stem}")
    assert 0 <= copy < enable, f"{conf.name}: copy it into sites-available, then a2ensite"


def test_nginx_steps_copy_the_file_into_sites_available_before_linking_it():
    text = NGINX_SITE.read_text()
    copy = text.find(f"cp {NGINX_SITE.name} /etc/nginx/sites-available/")
    link = text.find(f"ln -s ../sites-available/{NGINX_SITE.name} /etc/nginx/sites-enabled/")
    assert 0 <= copy < link


class Leftover:
    """A directory the servers of a test make outside it, removed with them (`fronts`)."""

    def __init__(self, path: Path):
        self.path = path

    def kill(self) -> None:
        shutil.rmtree(self.path, ignore_errors=True)


def installed(match) -> None:
    """`apt-get install PACKAGE`: the machine must have it (the test's skip reasons say so)."""
    done = subprocess.run(
        ["dpkg-query", "-W", "-f=${Status}", match.group(1)], capture_output=True, text=True
    )
    assert done.stdout == "install ok installed", f"{match.group(1)} is not installed"


def machine_dirs(public: Path) -> None:
    """What Debian has before the recipe: /etc/systemd/system, /usr/lib/cgi-bin (apache2)."""
    for name in ("systemd", "cgi-bin"):
        (public / name).mkdir(mode=0o755)


def apache_recipe(apache: DebianApache, public: Path, fronts: list) -> Runner:
    """The runner of an Apache file's steps, on `apache` (running) and the test's copies."""
    machine_dirs(public)
    units = Units(public / "systemd", public / "state", public, fronts)
    runner = Runner(
        [
            ("/etc/apache2", str(apache.confdir)),
            ("<VirtualHost *:80>", f"<VirtualHost *:{apache.port}>"),
            *machine(public, f"127.0.0.1:{apache.port}"),
        ],
        files=[
            apache.confdir / "sites-available",
            *(public / name for name in ("etc", "opt", "cgi-bin", "systemd")),
        ],
    )
    runner.map(r"apt-get install (\S+)", installed)
    runner.map(r"systemctl reload apache2", lambda m: apache.reload())
    runner.map(r"systemctl restart apache2", lambda m: apache.restart())
    runner.map(r"systemctl daemon-reload", lambda m: None)  # units are read when started
    runner.map(r"systemctl enable --now (\S+)", lambda m: units.start(m.group(1)))
    env = {**apache.env, "HOME": "/root"}
    runner.map(rf"{public}/opt/venv/bin/archive-service .*", shell(CONTRIB / "apache", env))
    runner.map(AS_THEY_ARE, shell(CONTRIB / "apache", env))
    return runner


def running_apache(public: Path, fronts: list) -> DebianApache:
    """Debian's apache2 as apt-get leaves it: running (its default site off: another port)."""
    fronts.append(apache := DebianApache(public, free_port()))
    return apache.start()


def answering(front: str) -> None:
    """Wait for the first index (built by the indexer the steps started): 503 until then."""
    url = f"{front}/{SERVICE}?servicesubject=inclusionConfirmationRequest"

    def ready() -> bool:
        status, body = fetch(url)
        assert status in (200, 503), (status, body[:300])  # a 500: the settings, say
        return status == 200

    wait_until(ready, 60, f"{url} to answer")


def assert_counted(front: str, python: str, site: Path, config: Path) -> None:
    """An acknowledgment of the non-ASCII target's URL, sent through the front, is counted
    where `archive-service stats` with the same config (as the web server's user) reads."""
    answer = url_request(front, TARGET_IBI)
    acknowledge(front, answer)
    report = stats_as(WEB_USER, python, site, config)
    assert report["total"] == 1 and report["rejected"] == 0, report


@pytest.mark.process
@needs_debian_apache
@needs_mod_wsgi
def test_mod_wsgi_recipe_as_written(public, fronts):
    """archive-service-wsgi.conf's steps, archiveserviceibi and the indexer unit included."""
    venv = debian_venv(public)
    apache = running_apache(public, fronts)
    apache_recipe(apache, public, fronts).run(comment_steps(APACHE_WSGI))
    config = public / "etc" / "archive-service.yaml"
    with apache.explained():
        answering(apache.url)
        check_front(apache.url, public / "collection")
        assert_counted(apache.url, str(venv / "bin" / "python3"), public / "site", config)
    assert "Traceback" not in apache.logs() and "rror" not in apache.logs(), apache.logs()


@pytest.mark.process
@needs_debian_apache
@needs_mod_wsgi
def test_mod_wsgi_without_the_systemd_unit_answers_at_once(public, fronts):
    """No systemd unit made /var/lib/archive-service, the home of the user the daemon runs
    as (here `nobody`, whose home /nonexistent is missing too) and the state_dir the settings
    name. Every request answered at once, not after Apache's Timeout (300 s) with a 504; the
    error log says what is wrong with the state_dir once per daemon process."""
    python, site = debian_python_site(public)
    port = free_port()
    missing = public / "root-only" / "archive-service"
    missing.parent.mkdir(mode=0o755)
    fallback = Path("/tmp/archive-service-65534")  # where nobody's processes fall back to
    if not fallback.exists():
        fronts.append(Leftover(fallback))
    config = write_config(public, f"127.0.0.1:{port}", missing)
    cli_as("nobody", python, site, config, "index")  # into the same fallback
    apache = start_mod_wsgi(fronts, public, port, config, site, user=("nobody", "nogroup"))
    with apache.explained():
        started = time.monotonic()
        check_front(apache.url, public / "collection")
        acknowledge(apache.url, url_request(apache.url, TARGET_IBI))
        assert time.monotonic() - started < 20
    assert not missing.exists()
    lines = apache.logs().count(f"state_dir {missing} cannot be used")
    assert 1 <= lines <= 2, apache.logs()  # processes=2


@pytest.mark.process
@pytest.mark.slow
@needs_debian_apache
def test_cgi_recipe_as_written(public, fronts):
    """archive-service-cgi.conf's steps on a running Apache: `a2enmod cgid` then the restart
    (a reload leaves mod_cgid's daemon unstarted: every request 503, AH01257); mod_cgid runs
    the program as www-data, which reads the settings and owns the state_dir, so
    acknowledgments are verified and counted."""
    venv = debian_venv(public)
    apache = running_apache(public, fronts)
    apache_recipe(apache, public, fronts).run(comment_steps(APACHE_CGI))
    config = public / "etc" / "archive-service.yaml"
    with apache.explained():
        answering(apache.url)
        check_front(apache.url, public / "collection", light=True)
        assert_counted(apache.url, str(venv / "bin" / "python3"), public / "site", config)


def check_counted_behind(front: Front, public: Path, state: Path) -> None:
    """check_front through a proxy in front of `serve`, and an acknowledgment of the
    non-ASCII target counted in serve's state_dir."""
    with front.explained():
        check_front(front.url, public / "collection")
        acknowledge(front.url, url_request(front.url, TARGET_IBI))
        assert stats.Store(state).report()["total"] == 1


@pytest.mark.process
@needs_debian_apache
def test_apache_proxy_recipe_as_written(public, tmp_path, fronts):
    """archive-service.conf's steps (copy, sed, a2enmod, a2ensite, reload) on a running
    Apache in front of `serve`: non-ASCII names through `nocanon` byte for byte,
    acknowledgments counted, and no warning in the error log per request (AH01136)."""
    apache = running_apache(public, fronts)
    serve = serve_behind(
        public, tmp_path, apache.port, fronts, "--state-dir", str(tmp_path / "state")
    )
    runner = apache_recipe(apache, public, fronts)
    runner.substitutions.append((BACKEND, serve.address))
    runner.run(comment_steps(APACHE_VHOST))
    check_counted_behind(apache, public, tmp_path / "state")
    assert '"GET /col/' in serve.log()
    errors = (apache.run / "log" / "archive-service-error.log").read_text()
    assert "AH01136" not in errors and "[proxy:warn]" not in errors, errors


@pytest.mark.process
@needs_debian_apache
def test_apache_alias_alternative(public, tmp_path, fronts):
    """The alternative the proxy file names: /col/ straight from disk."""
    port = free_port()
    serve = serve_behind(public, tmp_path, port, fronts, "--state-dir", str(tmp_path / "state"))
    site = rewrite(
        APACHE_VHOST.read_text(),
        ("*:80", f"*:{port}"),
        (BACKEND, serve.address),
        (COLLECTION, str(public / "collection")),
    )
    lines = re.findall(r"^    #   (.*)$", site, re.MULTILINE)
    assert lines, "the commented AliasMatch block is gone"
    site = rewrite(
        site,
        (
            f'    ProxyPass "/col/" "http://{serve.address}/col/" nocanon\n',
            "".join(f"    {line}\n" for line in lines),
        ),
    )
    apache = start_debian_apache(fronts, public, port, site, "proxy", "proxy_http", "headers")
    check_counted_behind(apache, public, tmp_path / "state")
    assert '"GET /col/' not in serve.log()


@pytest.mark.process
@needs_debian_nginx
def test_nginx_recipe_as_written(public, tmp_path, fronts):
    """nginx/archive-service.conf's steps (copy, sed, link, nginx -t, reload) on a running
    nginx in front of `serve`."""
    fronts.append(nginx := DebianNginx(public, free_port(), keep_default=True))
    nginx.start()
    serve = serve_behind(
        public, tmp_path, nginx.port, fronts, "--state-dir", str(tmp_path / "state")
    )
    machine_dirs(public)
    runner = Runner(
        [
            ("/etc/nginx", str(nginx.etc)),
            ("listen 80;", f"listen 127.0.0.1:{nginx.port};"),
            (BACKEND, serve.address),
            *machine(public, "127.0.0.1"),  # server_name: a name, without the port
        ],
        files=[nginx.etc / "sites-available"],
    )
    runner.map(r"nginx -t", lambda m: nginx.check())
    runner.map(r"systemctl reload nginx", lambda m: nginx.reload())
    runner.map(AS_THEY_ARE, shell(CONTRIB / "nginx", {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin"}))
    runner.run(comment_steps(NGINX_SITE))
    check_counted_behind(nginx, public, tmp_path / "state")
    assert '"GET /col/' in serve.log()


@pytest.mark.process
@needs_debian_nginx
def test_nginx_alias_alternative(public, tmp_path, fronts):
    """The alternative the nginx file names: /col/ straight from disk."""
    port = free_port()
    serve = serve_behind(public, tmp_path, port, fronts, "--state-dir", str(tmp_path / "state"))
    site = rewrite(
        NGINX_SITE.read_text(),
        ("listen 80;", f"listen 127.0.0.1:{port};"),
        (f"server {BACKEND};", f"server {serve.address};"),
    )
    proxied = site[site.index("    location ^~ /col/ {") :]
    proxied = proxied[: proxied.index("}\n") + 2]
    site = site.replace(proxied, "")
    commented = re.findall(r"^    #   (.*)$", site, re.MULTILINE)
    assert commented, "the commented alias block is gone"
    block = "\n".join("    " + line for line in commented)
    site = (
        site[: site.rindex("}")]
        + rewrite(block, (COLLECTION, str(public / "collection")))
        + "\n}\n"
    )
    nginx = start_debian_nginx(fronts, public, port, site)
    check_counted_behind(nginx, public, tmp_path / "state")
    assert '"GET /col/' not in serve.log()
