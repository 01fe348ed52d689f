"""The admin's recipes as the tests follow them: the shell commands of contrib/'s files and of
README.md's "Production in ten steps", read in order from a fixed format, and a runner that
carries each one out with only declared substitutions and mappings.

Formats (what an admin reads, and what is parsed):
- a contrib file: comment lines `#   $ COMMAND`; a command ending in `<<'EOF'` takes the
  comment lines below it, up to `#   EOF`, as its here-document;
- Markdown: the lines of a ```sh block; a line ending in `\\` continues on the next, a
  here-document runs up to its `EOF` line, lines starting with `#` are comments.
A leading `sudo ` is dropped, a trailing `  # comment` too, and `A && B` is two steps.

Every step must match one of the runner's mappings; one that matches none fails the test with
"unmapped step: ...", so a recipe changed without its test is caught."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import signal
import subprocess
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from fronts import WEB_USER, debian_python_site, unit_values
from serve_process import SERVICE, Process

COMMENT_STEP = re.compile(r"^#   \$ (.*)$")
HEREDOC = re.compile(r"<<-?'?(\w+)'?\s*$")


def _commands(lines: Iterable[str]) -> list[str]:
    """Whole commands from raw lines: continuations joined, here-documents kept, `sudo `,
    trailing comments and `&&` split off."""
    commands: list[str] = []
    lines = iter(lines)
    for line in lines:
        line = line.rstrip()
        while line.endswith("\\"):
            line = line[:-1].rstrip() + " " + next(lines).strip()
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        if heredoc := HEREDOC.search(line):
            body = []
            for more in lines:
                if more.strip() == heredoc.group(1):
                    break
                body.append(more)
            commands.append("\n".join([_bare(line), *body, heredoc.group(1)]))
            continue
        commands += [_bare(part) for part in _bare(line).split(" && ")]
    return commands


def _bare(command: str) -> str:
    command = re.sub(r"\s+#\s.*$", "", command.strip())
    return re.sub(r"(^|\|\s*)sudo ", r"\1", command).strip()


def comment_steps(path: Path) -> list[str]:
    """The `#   $ ` steps at the top of a contrib file, in order."""
    raw: list[str] = []
    in_heredoc = None
    for line in path.read_text().splitlines():
        if in_heredoc is not None:
            body = line.removeprefix("#   ")
            raw.append(body)
            if body.strip() == in_heredoc:
                in_heredoc = None
        elif step := COMMENT_STEP.match(line):
            raw.append(step.group(1))
            if heredoc := HEREDOC.search(step.group(1)):
                in_heredoc = heredoc.group(1)
    assert raw, f"{path.name} has no `#   $ ` steps"
    return _commands(raw)


def markdown_blocks(text: str, heading: str) -> list[list[str]]:
    """The commands of each ```sh block of the section `heading` (up to the next heading of
    the same or a higher level outside a block), block by block."""
    level = len(heading.split(" ")[0])
    lines = text[text.index(f"\n{heading}\n") + 1 :].splitlines()[1:]
    blocks: list[list[str]] = []
    block: list[str] | None = None
    fenced = False
    for line in lines:
        if line.startswith("```"):
            fenced = not fenced
            if block is not None:
                blocks.append(_commands(block))
                block = None
            elif line == "```sh":
                block = []
        elif block is not None:
            block.append(line)
        elif not fenced and re.match(rf"#{{1,{level}}} ", line):
            break
    return blocks


@dataclass
class Runner:
    """Carries out steps: each step's text, with `substitutions` applied (longest first is
    the caller's order), must fully match one of `mappings`' patterns, whose action runs it.
    `files`: directories whose text files get the same substitutions after every step (the
    copies of contrib's files a step installs, the settings a step writes)."""

    substitutions: list[tuple[str, str]]
    mappings: list[tuple[str, Callable[[re.Match], None]]] = field(default_factory=list)
    files: list[Path] = field(default_factory=list)
    done: list[str] = field(default_factory=list)

    def substitute(self, text: str) -> str:
        """Each old string, as a whole word or path (so that applying them again to a file
        already rewritten changes nothing), replaced."""
        for old, new in self.substitutions:
            whole = rf"(?<![\w.-]){re.escape(old)}(?![\w.-])"
            text = re.sub(whole, new.replace("\\", "\\\\"), text)
        return text

    def map(self, pattern: str, action: Callable[[re.Match], None]) -> None:
        self.mappings.append((pattern, action))

    def run(self, steps: Iterable[str]) -> None:
        for step in steps:
            self.step(step)

    def step(self, step: str) -> None:
        text = self.substitute(step)
        for pattern, action in self.mappings:
            if match := re.fullmatch(pattern, text, re.DOTALL):
                action(match)
                self.done.append(step)
                self.rewrite_files()
                return
        pytest.fail(f"unmapped step: {step}")

    def rewrite_files(self) -> None:
        for top in self.files:
            for path in top.rglob("*") if top.is_dir() else [top]:
                if path.is_file() and not path.is_symlink():
                    try:
                        text = path.read_text()
                    except (UnicodeDecodeError, PermissionError):
                        continue
                    if (new := self.substitute(text)) != text:
                        path.write_text(new)


def shell(cwd: Path, env: dict[str, str]) -> Callable[[re.Match], None]:
    """A mapping's action: the step, substituted, run by bash in `cwd` ("this folder")."""

    def run(match: re.Match) -> None:
        done = subprocess.run(
            ["bash", "-euo", "pipefail", "-c", match.group(0)],
            cwd=cwd,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode == 0, f"{match.group(0)}: {done.stdout}{done.stderr}"

    return run


# The programs a recipe may run as they are (after substitution), in the test's copies.
AS_THEY_ARE = (
    r"(?:cp|install|ln|sed|chgrp|chmod|chown|mkdir|tee|echo|a2enmod|a2ensite|a2dissite|"
    r"printf|runuser|curl)\b.*"
)


def debian_venv(public: Path) -> Path:
    """/opt/archive-service/venv as ../systemd/README.md makes it, for Debian's python3 (the
    one mod_wsgi is built for) under `public`/opt: a real venv whose site finds the copy of
    our package and its dependencies (`pip install` is mapped to that copy, never the
    network), with its `archive-service` command."""
    python, site = debian_python_site(public)
    venv = public / "opt" / "venv"
    subprocess.run([python, "-m", "venv", "--without-pip", str(venv)], check=True)
    where = "import sysconfig; print(sysconfig.get_path('purelib'))"
    purelib = subprocess.run(
        [str(venv / "bin" / "python3"), "-c", where],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    Path(purelib, "archive-service-tests.pth").write_text(f"{site}\n")
    command = venv / "bin" / "archive-service"
    command.write_text(
        f"#!{venv}/bin/python3\nimport sys\n"
        "from archive_service.cli import main\nsys.exit(main())\n"
    )
    command.chmod(0o755)
    for directory, dirs, _ in os.walk(public / "opt"):
        for name in dirs:
            os.chmod(os.path.join(directory, name), 0o755)
    return venv


def machine(public: Path, host: str, resolver: str = "127.0.0.1") -> list[tuple[str, str]]:
    """The declared substitutions of every recipe: Debian's paths to the test's copies under
    `public`, the example host to the front's loopback address, urlib.net to the resolver
    (by default the test itself, which sends acknowledgments from loopback), the placeholders
    of a `sed` step to the sample's values, and the service's user `archive-service` (made by
    ../systemd/README.md's useradd) to www-data, which Debian has."""
    return [
        ("urlib.net", resolver),
        ("/etc/archive-service", f"{public}/etc"),
        ("/opt/archive-service", f"{public}/opt"),
        ("/usr/lib/cgi-bin", f"{public}/cgi-bin"),
        ("/var/lib/archive-service", f"{public}/state"),
        ("/srv/archive-service/collection", f"{public}/collection"),
        ("/etc/systemd/system", f"{public}/systemd"),
        ("<your archiveserviceibi>", SERVICE),
        ("<your host>", host),
        ("archive.example.org", host),
        *(
            (f"{flag}archive-service", f"{flag}{WEB_USER}")
            for flag in (
                "-o ",
                "-g ",
                "runuser -u ",
                "chgrp ",
                "user=",
                "group=",
                "User=",
                "Group=",
            )
        ),
    ]


class Units:
    """systemd for the recipes: `systemctl enable --now NAME` runs the ExecStart= of the unit
    file a step installed in `unit_dir` (its drop-ins applied) as its User=/Group=, with the
    Environment=, StateDirectory= (`state`) and LoadCredential= systemd would give it, through
    the one launcher of our processes; each is stopped with the test (`fronts`)."""

    def __init__(self, unit_dir: Path, state: Path, logs: Path, fronts: list):
        self.unit_dir, self.state, self.logs, self.fronts = unit_dir, state, logs, fronts
        self.started: dict[str, Process] = {}

    def values(self, name: str) -> dict[str, list[str]]:
        unit = self.unit_dir / f"{name}.service"
        values = unit_values(unit)
        for drop_in in sorted(Path(f"{unit}.d").glob("*.conf")):
            values.update(unit_values(drop_in))
        return values

    def start(self, name: str) -> Process:
        if name in self.started and self.started[name].proc.poll() is None:
            return self.started[name]  # already running: systemctl starts nothing
        values = self.values(name)
        user, group = values["User"][-1], values["Group"][-1]
        env = dict(value.split("=", 1) for value in values.get("Environment", []))
        if "StateDirectory" in values:
            mode = int(values.get("StateDirectoryMode", ["0755"])[-1], 8)
            self.state.mkdir(mode=mode, exist_ok=True)
            shutil.chown(self.state, user, group)
            env["STATE_DIRECTORY"] = str(self.state)
        for credential in values.get("LoadCredential", []):
            cred_name, _, source = credential.partition(":")
            directory = self.logs / f"credentials-{name}"
            directory.mkdir(mode=0o700, exist_ok=True)
            shutil.copy(source, directory / cred_name)
            for path in (directory, directory / cred_name):
                shutil.chown(path, user, group)
            env["CREDENTIALS_DIRECTORY"] = str(directory)
        argv = shlex.split(values["ExecStart"][-1])
        log = self.logs / f"{name}.log"
        log.write_bytes(b"")
        program = ["setpriv", f"--reuid={user}", f"--regid={group}", "--init-groups", "--"]
        process = Process(argv[1:], log, env, program=[*program, argv[0]]).start()
        self.fronts.append(process)
        self.started[name] = process
        return process

    def reload(self, name: str, logged: str) -> None:
        """`systemctl reload NAME`: its ExecReload= (the unit's is `kill -HUP $MAINPID`),
        done when the unit has logged `logged` once more."""
        assert self.values(name)["ExecReload"][-1] == "/bin/kill -HUP $MAINPID"
        process = self.started[name]
        count = process.text().count(logged)
        process.proc.send_signal(signal.SIGHUP)
        process.wait_log(logged, count + 1)

    def stop(self, name: str) -> None:
        """`systemctl stop NAME`: SIGTERM to the main process alone (KillMode=mixed), within
        TimeoutStopSec=; a clean exit."""
        values = self.values(name)
        assert values["KillMode"][-1] == "mixed"
        timeout = float(values["TimeoutStopSec"][-1])
        assert self.started[name].stop(signal.SIGTERM, timeout) == 0
