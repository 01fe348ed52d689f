"""contrib/'s variants (Apache proxy, mod_wsgi, CGI; nginx) in Debian's own apache2 and
nginx, started as Debian starts them (apache2ctl sourcing /etc/apache2/envvars: LANG=C,
www-data; `nginx -g 'daemon on; master_process on;'`), each site copied into
sites-available and enabled as its steps say, with non-ASCII file names and acknowledgments
counted in the statistics."""

from __future__ import annotations

import re
import shutil
import time
from pathlib import Path

import pytest

from archive_service.stores import stats
from fronts import (
    APACHE_VHOST,
    BACKEND,
    COLLECTION,
    CONTRIB,
    NGINX_SITE,
    TARGET_IBI,
    WEB_USER,
    Front,
    acknowledge,
    check_front,
    cli_as,
    debian_python_site,
    needs_debian_apache,
    needs_debian_nginx,
    needs_mod_wsgi,
    rewrite,
    serve_behind,
    start_cgi,
    start_debian_apache,
    start_debian_nginx,
    start_mod_wsgi,
    state_dir_of,
    stats_as,
    url_request,
    write_config,
)
from serve_process import free_port


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
def test_mod_wsgi_as_debian_runs_it(public, fronts):
    python, site = debian_python_site(public)
    port = free_port()
    config = write_config(public, f"127.0.0.1:{port}", state_dir_of(public))
    cli_as(WEB_USER, python, site, config, "index")  # the daemon answers from it as it stands
    apache = start_mod_wsgi(fronts, public, port, config, site)
    with apache.explained():
        check_front(apache.url, public / "collection")
        assert_counted(apache.url, python, site, config)
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
def test_cgi_as_debian_runs_it(public, fronts):
    """mod_cgid runs the program as www-data: with the settings and the state_dir of the
    file's steps, it reads its config and acknowledgments are verified and counted."""
    python, site = debian_python_site(public)
    port = free_port()
    config = write_config(public, f"127.0.0.1:{port}", state_dir_of(public))
    config.chmod(0o640)  # install -m 0640 -g www-data
    shutil.chown(config, "root", WEB_USER)
    cli_as(WEB_USER, python, site, config, "index")  # what the indexer's unit keeps current
    apache = start_cgi(fronts, public, port, config, python, site)
    with apache.explained():
        check_front(apache.url, public / "collection", light=True)
        assert_counted(apache.url, python, site, config)


def check_counted_behind(front: Front, public: Path, state: Path) -> None:
    """check_front through a proxy in front of `serve`, and an acknowledgment of the
    non-ASCII target counted in serve's state_dir."""
    with front.explained():
        check_front(front.url, public / "collection")
        acknowledge(front.url, url_request(front.url, TARGET_IBI))
        assert stats.Store(state).report()["total"] == 1


@pytest.mark.process
@needs_debian_apache
@pytest.mark.parametrize("col", ["proxy", "alias"])
def test_proxy_as_debian_runs_it(public, tmp_path, fronts, col):
    """`serve` behind contrib's proxy vhost: non-ASCII names through `nocanon` byte for byte,
    acknowledgments counted, and no warning in the error log per request (AH01136)."""
    port = free_port()
    serve = serve_behind(public, tmp_path, port, fronts, "--state-dir", str(tmp_path / "state"))
    site = rewrite(
        APACHE_VHOST.read_text(),
        ("*:80", f"*:{port}"),
        (BACKEND, serve.address),
        (COLLECTION, str(public / "collection")),
    )
    if col == "alias":  # the alternative the file names: files straight from disk
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
    assert ('"GET /col/' in serve.log()) == (col == "proxy")
    errors = (apache.run / "log" / "archive-service-error.log").read_text()
    assert "AH01136" not in errors and "[proxy:warn]" not in errors, errors


@pytest.mark.process
@needs_debian_nginx
@pytest.mark.parametrize("col", ["proxy", "alias"])
def test_nginx_as_debian_runs_it(public, tmp_path, fronts, col):
    """`serve` behind contrib's nginx site, in nginx as nginx.service starts it."""
    port = free_port()
    serve = serve_behind(public, tmp_path, port, fronts, "--state-dir", str(tmp_path / "state"))
    site = rewrite(
        NGINX_SITE.read_text(),
        ("listen 80;", f"listen 127.0.0.1:{port};"),
        (f"server {BACKEND};", f"server {serve.address};"),
    )
    if col == "alias":  # the alternative the file names: files straight from disk
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
    assert ('"GET /col/' in serve.log()) == (col == "proxy")
