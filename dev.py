#!/usr/bin/env python3
"""Run archive-service from a checkout with nothing but Python 3.11 installed.

    python3 dev.py serve     serve the sample collection on http://127.0.0.1:8080
    python3 dev.py test      run the test suite
    python3 dev.py lint      ruff check and ruff format --check (what .ci/run requires)
    python3 dev.py run ...   run any archive-service command in the project's venv

The first call creates ./.venv and installs the project (with its test extra) into it;
later calls reinstall only when the packaging files (pyproject.toml, setup.cfg) changed.
"""

import hashlib
import os
import subprocess
import sys
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent
VENV = ROOT / ".venv"
BIN = VENV / ("Scripts" if os.name == "nt" else "bin")
PYTHON = BIN / "python"
STAMP = VENV / ".archive-service-installed"


def _fingerprint() -> str:
    digest = hashlib.sha256()
    for name in ("pyproject.toml", "setup.cfg", "setup.py"):
        path = ROOT / name
        if path.exists():  # only pyproject.toml is required; adding or removing one counts too
            digest.update(name.encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def ensure_venv() -> None:
    if not PYTHON.exists():
        print("dev.py: creating .venv", file=sys.stderr)
        venv.EnvBuilder(with_pip=True).create(VENV)
    wanted = _fingerprint()
    if STAMP.exists() and STAMP.read_text() == wanted:
        return
    print("dev.py: installing archive-service and its test tools into .venv", file=sys.stderr)
    pip = [str(PYTHON), "-m", "pip", "--disable-pip-version-check", "-q"]
    subprocess.run(pip + ["install", "-e", f"{ROOT}[test]"], check=True)
    STAMP.write_text(wanted)


def main(argv: list[str]) -> int:
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__)
        return 0 if argv else 2
    command, rest = argv[0], argv[1:]
    ensure_venv()
    if command == "test":
        cmd = [str(PYTHON), "-m", "pytest", *rest]
    elif command == "serve":
        config = ROOT / "sample_collection" / "archive-service.yaml"
        cmd = [str(BIN / "archive-service"), "serve", "--config", str(config), *rest]
    elif command == "run":
        cmd = [str(BIN / "archive-service"), *rest]
    elif command == "lint":
        os.chdir(ROOT)
        # Both, so that one run reports every finding; fix with `ruff check --fix` and
        # `ruff format` (in .venv/bin).
        checked = subprocess.call([str(BIN / "ruff"), "check", *rest])
        formatted = subprocess.call([str(BIN / "ruff"), "format", "--check", *rest])
        return checked or formatted
    else:
        print(f"dev.py: unknown command {command!r} (serve, test, lint or run)", file=sys.stderr)
        return 2
    os.chdir(ROOT)
    child = subprocess.Popen(cmd)
    while True:
        try:
            return child.wait()
        except KeyboardInterrupt:
            # Ctrl-C reached the child too, which stops by itself (serve leaves the resolver
            # first): wait for it rather than print a traceback of our own.
            continue


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
