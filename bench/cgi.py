"""One CGI request through contrib/apache/archive-service.cgi, as Apache runs it, against a
constant Flask app run as CGI the same way (the floor).

    python bench/cgi.py --config SIZE=FILE [--config SIZE=FILE ...] [--rounds 15]
                        [--importtime] [--checkout DIR]

Each FILE is the settings of one collection whose index is already built (`archive-service
index --config FILE`); SIZE is its label (10000, 1000000). The collection must hold the item
`bench.example.org/cgi/2024/01.01.00.00` with a 1 MB `doc/big.bin` (the generated collections
of bench/gen.py have empty files only: put it in an overlay of the cached collection, see
bench/RESULTS.md).

Both programs are copies of their script whose first line names this interpreter (the venv's
Python, as the install steps say), executed directly with the environment Apache's mod_cgi
gives (RFC 3875 meta-variables, ARCHIVE_SERVICE_CONFIG from SetEnv, nothing else) and the
script's folder as working directory. Three requests: inclusionConfirmationRequest, a full
urlRequest of an item of the collection, a 1 MB download under /col/. The floor answers the
same paths with a constant body of the same length class (a short text, or 1 MB). Programs
run alternately (app, floor, floor, app, ...) so a change of load on the machine hits both;
the figures are the median wall time and CPU time (user + system, less disturbed by other
work on a busy machine) of each, and their ratios.

--importtime runs one inclusionConfirmationRequest and one 1 MB download with
PYTHONPROFILEIMPORTTIME and prints, for each, the slowest imports (cumulative) and the total.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CGI_FILE = ROOT / "contrib" / "apache" / "archive-service.cgi"
SHEBANG = "#!/opt/archive-service/venv/bin/python3"
SERVICE = "sid.inpe.br/mtc-m18@80/2008/03.17.15.17"
BIG = "bench.example.org/cgi/2024/01.01.00.00/doc/big.bin"
MEGABYTE = 1 << 20

FLOOR = """
from wsgiref.handlers import CGIHandler

from flask import Flask

app = Flask(__name__)
BIG = b"x" * (1 << 20)  # MEGABYTE


@app.route("/col/<path:path>")
def download(path):
    return BIG, {"Content-Type": "application/octet-stream"}


@app.route("/<path:path>")
def constant(path):
    return "confirmation yes", {"Content-Type": "text/plain; charset=utf-8"}


CGIHandler().run(app)
"""


def program(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.write_text(text)
    path.chmod(0o755)
    return path


def programs(folder: Path, checkout: Path = ROOT) -> tuple[Path, Path]:
    """The CGI program with this interpreter on its first line, and the floor."""
    text = (checkout / CGI_FILE.relative_to(ROOT)).read_text()
    assert text.startswith(SHEBANG), f"{CGI_FILE}: its first line is no longer {SHEBANG}"
    app = program(folder, "archive-service.cgi", f"#!{sys.executable}" + text[len(SHEBANG) :])
    floor = program(folder, "floor.cgi", f"#!{sys.executable}\n" + FLOOR)
    return app, floor


def environ(config: str, path_info: str, query: str = "") -> dict[str, str]:
    """What mod_cgi hands a program (RFC 3875), for a GET from the loopback."""
    return {
        "GATEWAY_INTERFACE": "CGI/1.1",
        "SERVER_SOFTWARE": "Apache/2.4",
        "SERVER_NAME": "archive.example.org",
        "SERVER_ADDR": "127.0.0.1",
        "SERVER_PORT": "80",
        "SERVER_PROTOCOL": "HTTP/1.1",
        "REQUEST_METHOD": "GET",
        "REQUEST_SCHEME": "http",
        "REQUEST_URI": "/" + path_info.lstrip("/") + ("?" + query if query else ""),
        "SCRIPT_NAME": "",
        "PATH_INFO": path_info,
        "QUERY_STRING": query,
        "REMOTE_ADDR": "127.0.0.1",
        "REMOTE_PORT": "40000",
        "HTTP_HOST": "archive.example.org",
        "HTTP_USER_AGENT": "bench/cgi.py",
        "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        "ARCHIVE_SERVICE_CONFIG": config,
    }


PYTHONPATH: dict[str, str] = {}  # --checkout: another version of the package


def cpu() -> float:
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def run(script: Path, env: dict[str, str], expect: bytes | int) -> tuple[float, float]:
    """The wall time and the CPU time (user + system) of one request."""
    env = {**env, **PYTHONPATH}
    started, spent = time.perf_counter(), cpu()
    done = subprocess.run([str(script)], env=env, cwd=script.parent, capture_output=True)
    elapsed, spent = time.perf_counter() - started, cpu() - spent
    head, _, body = done.stdout.partition(b"\r\n\r\n")
    ok = done.returncode == 0 and head.startswith(b"Status: 200")
    ok = ok and (len(body) == expect if isinstance(expect, int) else body.startswith(expect))
    if not ok:
        raise SystemExit(f"{script.name} {env['PATH_INFO']}: {head!r} {done.stderr.decode()}")
    return elapsed, spent


def an_item(config: str) -> str:
    """A full repository name of the collection (from bench/gen.py's manifest)."""
    from archive_service import settings

    collection = Path(settings.load(config).collection)
    manifest = json.loads((collection / "bench-manifest.json").read_text())
    return manifest["full"][0]


def requests(config: str) -> list[tuple[str, str, str, bytes | int]]:
    item = an_item(config)
    return [
        ("inclusionConfirmationRequest", f"/{SERVICE}",
         "servicesubject=inclusionConfirmationRequest", b"confirmation yes"),
        ("urlRequest", f"/{SERVICE}", f"servicesubject=urlRequest&parsedibiurl.ibi={item}"
         "&clientinformation.ipaddress=127.0.0.1", b"archiveaddress "),
        ("1 MB download", f"/col/{BIG}", "", MEGABYTE),
    ]  # fmt: skip


def measure(app: Path, floor: Path, config: str, rounds: int) -> list[dict]:
    rows = []
    for name, path, query, expect in requests(config):
        env = environ(config, path, query)
        floor_expect = MEGABYTE if isinstance(expect, int) else b"confirmation yes"
        run(app, env, expect)  # the page cache warm for both, as on a serving host
        run(floor, env, floor_expect)
        times: dict[str, list[tuple[float, float]]] = {"app": [], "floor": []}
        for i in range(rounds):
            order = ("app", "floor") if i % 2 == 0 else ("floor", "app")
            for which in order:
                if which == "app":
                    times["app"].append(run(app, env, expect))
                else:
                    times["floor"].append(run(floor, env, floor_expect))
        a = [statistics.median(t[i] for t in times["app"]) for i in (0, 1)]
        f = [statistics.median(t[i] for t in times["floor"]) for i in (0, 1)]
        rows.append(
            {
                "request": name,
                "app": a[0],
                "floor": f[0],
                "ratio": a[0] / f[0],
                "app cpu": a[1],
                "floor cpu": f[1],
                "cpu ratio": a[1] / f[1],
            }
        )
    return rows


def importtime(app: Path, config: str, request: tuple[str, str, str], top: int = 15) -> None:
    label, path, query = request
    env = environ(config, path, query)
    env.update(PYTHONPROFILEIMPORTTIME="1", **PYTHONPATH)
    done = subprocess.run(
        [str(app)], env=env, cwd=app.parent, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    rows = []
    for line in done.stderr.decode().splitlines():
        if not line.startswith("import time:") or "cumulative" in line:
            continue
        _, cumulative, name = line[len("import time:") :].split("|", 2)
        rows.append((int(cumulative), name.rstrip()))
    top_level = [r for r in rows if not r[1].startswith("  ")]
    total = sum(c for c, _ in top_level)
    print(f"{label}: {len(rows)} modules, {total / 1000:.0f} ms in top-level imports")
    for cumulative, name in sorted(rows, reverse=True)[:top]:
        print(f"  {cumulative / 1000:7.1f} ms  {name}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", action="append", required=True, metavar="SIZE=FILE")
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--importtime", action="store_true")
    parser.add_argument(
        "--checkout",
        type=Path,
        default=ROOT,
        help="measure the package and .cgi file of another checkout (e.g. `git archive main`)",
    )
    args = parser.parse_args()
    if args.checkout != ROOT:
        PYTHONPATH["PYTHONPATH"] = str(args.checkout.resolve())
    sizes = [tuple(c.split("=", 1)) for c in args.config]
    with tempfile.TemporaryDirectory(prefix="bench-cgi-") as folder:
        os.chmod(folder, 0o755)
        app, floor = programs(Path(folder), args.checkout)
        if args.importtime:
            for name, path, query, _ in requests(os.path.abspath(sizes[0][1]))[::2]:
                importtime(app, os.path.abspath(sizes[0][1]), (name, path, query))
        ratios: dict[str, dict[str, float]] = {}
        print(
            "| items | request | CGI request | constant Flask app as CGI | ratio "
            "| CPU: CGI request | CPU: floor | CPU ratio |"
        )
        print("| --- | --- | --- | --- | --- | --- | --- | --- |")
        for size, config in sizes:
            for row in measure(app, floor, os.path.abspath(config), args.rounds):
                ratios.setdefault(row["request"], {})[size] = row["ratio"]
                ratios.setdefault(row["request"] + " (CPU)", {})[size] = row["cpu ratio"]
                print(
                    f"| {int(size):,} | {row['request']} | {row['app'] * 1000:.0f} ms "
                    f"| {row['floor'] * 1000:.0f} ms | {row['ratio']:.2f}× "
                    f"| {row['app cpu'] * 1000:.0f} ms | {row['floor cpu'] * 1000:.0f} ms "
                    f"| {row['cpu ratio']:.2f}× |",
                    flush=True,
                )
        if len(sizes) > 1:
            first, last = sizes[0][0], sizes[-1][0]
            for request, by_size in ratios.items():
                print(f"{request}: ratio at {last} ÷ ratio at {first} = "
                      f"{by_size[last] / by_size[first]:.2f}")  # fmt: skip


if __name__ == "__main__":
    main()
