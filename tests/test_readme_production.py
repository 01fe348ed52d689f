"""README's "Production in ten steps", block by block, in Debian's apache2 as apt-get leaves it
(running), with our own `archive-service resolver serve` on loopback as the real outside
party in urlib.net's place. Each step runs verbatim (tests/recipes.py) but for the declared
substitutions of recipes.machine and these mappings:

- `python3 -m venv` + `pip install .`: the venv recipes.debian_venv made of the test's
  installed package for Debian's Python (no network);
- `useradd ... archive-service`: the service's user is www-data, which Debian has;
- `archive-service resolver register` (the resolver operator's step): on our resolver's
  state directory;
- `systemctl ...`: Apache's reload as Debian's unit does it; `enable --now archive-service`:
  the installed unit's ExecStart= as its User= (recipes.Units); `daemon-reload`: nothing;
- `journalctl -u UNIT -g PATTERN`: that unit's output, waited for until it matches.

The end: a persistent URL through the resolver is a redirect to a file Apache serves from the
Archive, and the Archive's inclusion state is `included`."""

from __future__ import annotations

import json
import re
import shlex
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from archive_service.common import inclusion
from fronts import BACKEND, WEB_USER, DebianApache, fetch, needs_debian_apache, unit_values
from recipes import AS_THEY_ARE, Runner, Units, debian_venv, machine, markdown_blocks, shell
from serve_process import ROOT, SERVICE, Process, free_port, http_get, wait_until

pytestmark = [
    pytest.mark.process,
    needs_debian_apache,
    # The steps' checks are curl commands, run as written; units run as their User= through
    # setpriv (util-linux), as systemd would switch to it.
    pytest.mark.skipif(
        not (shutil.which("curl") and shutil.which("setpriv")), reason="no curl or setpriv"
    ),
]

README = ROOT / "README.md"
CONTRIB_README = ROOT / "contrib" / "README.md"
SYSTEMD_README = ROOT / "contrib" / "systemd" / "README.md"
RELOADED = "reload: the announced pairs are unchanged"
SECTION = "## Production in ten steps"
PERSISTENT = "8JMKD3MGP8W/35MMLL8"
TARGET = "sid.inpe.br/mtc-m18@80/2009/07.21.14.43/doc/CCSDS 650.0-B-1.pdf"


def test_the_section_has_ten_steps_of_one_block_each():
    text = README.read_text()
    section = text[text.index(f"\n{SECTION}\n") :]
    section = section[: section.index("\n## ", 1)]
    numbers = re.findall(r"^(\d+)\. ", section, re.MULTILINE)
    assert numbers == [str(n) for n in range(1, 11)], numbers
    assert len(markdown_blocks(text, SECTION)) == 10


def journal(units: Units) -> Callable[[re.Match], None]:
    """`journalctl -u UNIT -g PATTERN`: the unit's output matches, within 30 s."""

    def match(found: re.Match) -> None:
        process = units.started[found.group(1)]
        pattern = re.compile(found.group(2))
        wait_until(
            lambda: pattern.search(process.text()) or process.check_running(),
            30,
            f"{found.group(0)}:\n{process.text()[-3000:]}",
        )

    return match


def cli_as_root(found: re.Match) -> None:
    """An `archive-service` command an admin runs with sudo, as the test's installed kit."""
    done = subprocess.run(
        [sys.executable, "-m", "archive_service.cli", *shlex.split(found.group(1))],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr


def user_exists(found: re.Match) -> None:
    subprocess.run(["id", WEB_USER], check=True, capture_output=True)


def test_production_in_ten_steps(public, fronts):
    debian_venv(public)
    for name in ("systemd", "resolver-state"):
        (public / name).mkdir(mode=0o755)
    fronts.append(apache := DebianApache(public, free_port()))
    apache.start()
    resolver_port = free_port()
    resolver_url = f"http://127.0.0.1:{resolver_port}"
    resolver = Process(
        ["resolver", "serve", "--state-dir", str(public / "resolver-state")]
        + ["--bind", f"127.0.0.1:{resolver_port}", "--timeout", "5"],
        public / "resolver.log",
    ).start()
    fronts.append(resolver)
    resolver.wait_answering(resolver_url + "/")
    host = f"127.0.0.1:{apache.port}"
    units = Units(public / "systemd", public / "state", public, fronts)
    runner = Runner(
        [
            ("/etc/apache2", str(apache.confdir)),
            ("<VirtualHost *:80>", f"<VirtualHost *:{apache.port}>"),
            ("/var/lib/archive-service-resolver", str(public / "resolver-state")),
            ("192.0.2.10", "127.0.0.1"),
            (BACKEND, f"127.0.0.1:{free_port()}"),
            *machine(public, host, resolver=f"127.0.0.1:{resolver_port}"),
        ],
        files=[apache.confdir / "sites-available", public / "etc", public / "systemd"],
    )
    venv_bin = f"{public}/opt/venv/bin"
    runner.map(rf"python3 -m venv {public}/opt/venv", lambda m: None)
    runner.map(rf"{venv_bin}/pip install \.", lambda m: None)
    runner.map(r"useradd --system .* archive-service", user_exists)
    env = {**apache.env, "HOME": "/root"}
    runner.map(rf"{venv_bin}/archive-service .*", shell(ROOT, env))
    runner.map(r"archive-service (resolver register .*)", cli_as_root)  # the operator's
    runner.map(r"apt-get install apache2", lambda m: None)  # needs_debian_apache
    runner.map(r"systemctl reload apache2", lambda m: apache.reload())
    runner.map(r"systemctl daemon-reload", lambda m: None)  # units are read when started
    runner.map(r"systemctl enable --now (\S+)", lambda m: units.start(m.group(1)))
    runner.map(r"journalctl -u (\S+) -g '([^']+)'", journal(units))
    runner.map(AS_THEY_ARE, shell(ROOT, env))
    blocks = markdown_blocks(README.read_text(), SECTION)
    with apache.explained():
        for block in blocks:
            runner.run(block)
        # The persistent URL, through the resolver, to the file through Apache.
        status, headers, _ = http_get(f"{resolver_url}/{PERSISTENT}")
        assert status == 302 and headers["Location"].startswith(f"http://{host}/col/"), status
        assert fetch(headers["Location"]) == (200, (public / "collection" / TARGET).read_bytes())
        health = json.loads(fetch(f"http://{host}/{SERVICE}/health")[1])
        assert health["inclusion"]["state"] == "included", health
        assert inclusion.read(public / "state").state == "included"
        # Then contrib/README.md's checks of a deployment, and contrib/systemd/README.md's
        # enable, reload, stop: on the same Archive, as the same admin.
        runner.map(r"archive-service (query .*)", cli_as_root)
        runner.map(r"systemctl reload (\S+)", lambda m: units.reload(m.group(1), RELOADED))
        runner.map(r"systemctl stop (\S+)", lambda m: units.stop(m.group(1)))
        runner.map(r"systemctl status (\S+)", lambda m: None)  # shows; nothing to do
        (checks,) = markdown_blocks(CONTRIB_README.read_text(), "## Checking a deployment")
        runner.run(checks)
        (enable,) = markdown_blocks(SYSTEMD_README.read_text(), "## Enable, start, reload, stop")
        runner.run(enable)
    serve = units.started["archive-service"]
    assert "status.archive excluded" in serve.text()  # the stop told the resolver
    assert inclusion.read(public / "state").state == "left"


def test_systemd_install_as_written(public):
    """contrib/systemd/README.md's Install block, run verbatim (no process started: the ten
    steps above start the unit): the settings the service's user reads, the key only root
    reads, the unit, and the pages its Documentation= names, all where the unit looks."""
    (public / "systemd").mkdir(mode=0o755)
    cli = f"{sys.executable} -m archive_service.cli"
    runner = Runner(
        [
            ("/opt/archive-service/venv/bin/archive-service", cli),
            ("/usr/share/doc/archive-service", f"{public}/doc"),
            *machine(public, "127.0.0.1"),
        ],
        files=[public / "etc", public / "systemd"],
    )
    runner.map(rf"python3 -m venv {public}/opt/venv", lambda m: None)
    runner.map(rf"{public}/opt/venv/bin/pip install \S+", lambda m: None)  # the test's kit
    runner.map(r"useradd --system .* archive-service", user_exists)
    runner.map(r"systemctl daemon-reload", lambda m: None)
    env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "HOME": "/root", "PYTHONPATH": str(ROOT)}
    runner.map(rf"{re.escape(cli)} .*", shell(SYSTEMD_README.parent, env))
    runner.map(AS_THEY_ARE, shell(SYSTEMD_README.parent, env))
    (install, *_) = markdown_blocks(SYSTEMD_README.read_text(), "## Install")
    runner.run(install)
    unit = unit_values(public / "systemd" / "archive-service.service")
    for page in unit["Documentation"][-1].split():
        assert Path(page.removeprefix("file://")).is_file(), page
    settings = public / "etc" / "archive-service.yaml"
    assert (settings.stat().st_mode & 0o777, settings.group()) == (0o640, WEB_USER)
    key = public / "etc" / "registrationkey"
    assert (key.stat().st_mode & 0o777, key.read_text()) == (0o600, "1234567890\n")
    (credential,) = unit["LoadCredential"]
    assert credential == f"registrationkey:{key}"
