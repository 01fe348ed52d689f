"""What serve's app costs a urlRequest in process, by layer, against the raw WSGI floor called
the same way (issue 35: urlRequest ≥ 0.9× a raw WSGI callable under the same gunicorn).

    python bench/urlrequest_inproc.py [--items 2000] [--n 3000] [--runs 5] [--code DIR ...]
                                      [--profile] [--cache DIR]

For each checkout in `--code` (default: this one; e.g. `git archive main | tar -x -C DIR`
for main's), in a process of its own and alternating between them `--runs` times:
create_app over the generated collection (bench/gen.py) with its indexer vouching, as serve's
worker has it, then the full urlRequest of the rotated items (bench/run.py's) called `--n`
times through each layer with an environ as gunicorn makes it: the app as gunicorn calls it,
then each middleware down to `Service.answer`, the access log's line (gunicorn's, the same for
the floor), and the floor (bench/floors.py's constant callable, sized like serve's answer).
Each figure is `time.thread_time` µs a request, the median of 5 slices; `app − floor` is
serve's own cost a request. `--profile`: cProfile's calls a request and the top functions.
"""

from __future__ import annotations

import argparse
import cProfile
import datetime
import json
import pstats
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

import floors  # noqa: E402
import gen  # noqa: E402
import run  # noqa: E402


def environ_of(path: str) -> dict:
    """An environ as gunicorn's gthread worker makes it for wrk's request of `path`."""
    target, _, query = path.partition("?")
    return {
        "wsgi.version": (1, 0),
        "wsgi.url_scheme": "http",
        "wsgi.input": None,
        "wsgi.errors": sys.stderr,
        "wsgi.multithread": True,
        "wsgi.multiprocess": True,
        "wsgi.run_once": False,
        "wsgi.file_wrapper": None,
        "wsgi.input_terminated": True,
        "SERVER_SOFTWARE": "gunicorn/23.0.0",
        "gunicorn.socket": None,
        "REQUEST_METHOD": "GET",
        "QUERY_STRING": query,
        "RAW_URI": path,
        "SERVER_PROTOCOL": "HTTP/1.1",
        "HTTP_HOST": "127.0.0.1:8080",
        "REMOTE_ADDR": "127.0.0.1",
        "REMOTE_PORT": "40000",
        "SERVER_NAME": "127.0.0.1",
        "SERVER_PORT": "8080",
        "PATH_INFO": target,
        "SCRIPT_NAME": "",
    }


class _Response:
    """What gunicorn's access logger reads of a response."""

    def __init__(self, status: str, headers: list, sent: int):
        self.status, self.headers, self.sent = status, headers, sent


def per_request(calls: dict, environs: list[dict], n: int, slices: int = 10) -> dict:
    """{name: median over `slices` of the thread CPU µs one `call(environ)` takes}, the calls'
    slices interleaved so that each sees the machine as the others do."""
    got: dict = {name: [] for name in calls}
    each = max(1, n // slices)
    for _ in range(slices):
        for name, call in calls.items():
            start = time.thread_time()
            for i in range(each):
                call(environs[i % len(environs)])
            got[name].append((time.thread_time() - start) / each * 1e6)
    return {name: statistics.median(values) for name, values in got.items()}


def wsgi_call(app):
    def start_response(status, headers, exc_info=None):
        return None

    def call(environ):
        body = app(dict(environ), start_response)
        b"".join(body)
        close = getattr(body, "close", None)
        if close is not None:
            close()

    return call


def layers(app) -> list[tuple[str, object]]:
    """(name, WSGI callable) from the app gunicorn calls down to the service endpoint."""
    found = [("app (Flask.__call__, as gunicorn calls it)", app)]
    layer = app.wsgi_app
    while layer is not None and not isinstance(layer, type(app)):
        found.append((type(layer).__name__, layer))
        if type(layer).__name__ == "ServiceEndpoint":
            break
        layer = getattr(layer, "app", None)
    return found


def one(args: argparse.Namespace) -> dict:
    """The figures of this process's checkout (its package first on sys.path)."""
    from archive_service import settings
    from archive_service.common import access, metrics
    from archive_service.web import create_app

    root, manifest = gen.ensure(args.items, args.cache, log=run.log)
    paths = [run.url_request(ibi, run.FULL_VERBS) for ibi in manifest["full"]]
    random.Random(0).shuffle(paths)
    environs = [environ_of(p) for p in paths]
    with tempfile.TemporaryDirectory(prefix="bench-inproc-") as tmp:
        metrics.use_directory(tmp, "metrics")  # as serve's master: multiprocess counts
        config = settings.load(
            options={
                "collection": str(root),
                "state_dir": str(Path(tmp) / "state"),
                "archiveaddress": "localhost:8080",
                "archiveserviceibi": run.SERVICE_IBI,
                "resolver": "none",
            },
            environ={},
        )
        app = create_app(config)
        live = app.extensions["archive_index"]
        live.follow()
        try:
            return _measure(app, environs, args, access)
        finally:
            live.close()


def _vouched(app, timeout: float = 60) -> bool:
    archive = app.extensions["archive"]
    current = getattr(archive, "_current", None)
    deadline = time.monotonic() + timeout
    while current is not None and time.monotonic() < deadline:
        if current():
            return True
        time.sleep(0.1)
    return False


def _measure(app, environs: list[dict], args, access) -> dict:
    vouched = _vouched(app)
    seen: list = []

    def start_response(status, headers, exc_info=None):
        seen[:] = [status, headers]

    body = b"".join(app(dict(environs[0]), start_response))
    status, headers = seen
    floor = floors.sized_wsgi(len(body), [name for name, _ in headers])
    calls = [(name, wsgi_call(layer)) for name, layer in layers(app)]
    endpoint = layers(app)[-1][1]
    if type(endpoint).__name__ == "ServiceEndpoint":
        calls.append(("Service.answer", lambda environ: endpoint.answer(dict(environ))))
    line = access.Access(False)
    response = _Response(status, headers, len(body))
    elapsed = datetime.timedelta(microseconds=500)
    calls.append(
        ("access log line (gunicorn's: floor's too)", lambda e: line.line(response, e, elapsed))
    )
    calls.append(("floor (constant, serve's body length and headers)", wsgi_call(floor)))
    for _name, call in calls:  # warm: every answer kept, every path seen
        for environ in environs:
            call(environ)
    figures = per_request(dict(calls), environs, args.n)
    result = {"figures": figures, "vouched": vouched, "body": len(body), "headers": len(headers)}
    result["opcodes"] = opcodes(calls[0][1], environs)
    if args.profile:
        result["profile"] = _profile(calls[0][1], environs, args.n)
    return result


def opcodes(call, environs: list[dict], n: int = 200) -> dict:
    """Python bytecodes executed and Python functions called a request (sys.settrace):
    a count the machine's load does not move, unlike its CPU time."""
    seen = {"opcodes": 0, "calls": 0}

    def trace(frame, event, arg):
        if event == "call":
            seen["calls"] += 1
            frame.f_trace_opcodes = True
        elif event == "opcode":
            seen["opcodes"] += 1
        return trace

    sys.settrace(trace)
    try:
        for i in range(n):
            call(environs[i % len(environs)])
    finally:
        sys.settrace(None)
    return {name: count / n for name, count in seen.items()}


def _profile(call, environs: list[dict], n: int) -> str:
    profile = cProfile.Profile()
    profile.enable()
    for i in range(n):
        call(environs[i % len(environs)])
    profile.disable()
    stats = pstats.Stats(profile)
    total = sum(cc for cc, _nc, _tt, _ct, _callers in stats.stats.values())
    out = [f"{total / n:.0f} calls a request (cProfile)"]
    ranked = sorted(stats.stats.items(), key=lambda kv: -kv[1][2])[:60]
    for (file, lineno, func), (cc, _nc, tt, ct, _callers) in ranked:
        where = f"{Path(file).parent.name}/{Path(file).name}:{lineno}"
        out.append(
            f"  {cc / n:5.1f}/req  tot {tt / n * 1e6:6.1f} µs  cum {ct / n * 1e6:6.1f} µs"
            f"  {func}  {where}"
        )
    return "\n".join(out)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=2000)
    parser.add_argument("--n", type=int, default=3000, help="calls of each layer a run")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--code", type=Path, nargs="*", default=[run.ROOT])
    parser.add_argument("--cache", type=Path, default=None)
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--one", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(one(args)))
        return 0
    gen.ensure(args.items, args.cache, log=run.log)
    codes = [code.resolve() for code in args.code]
    got: dict[Path, list[dict]] = {code: [] for code in codes}
    cmd = [sys.executable, __file__, "--one", "--items", str(args.items), "--n", str(args.n)]
    cmd += ["--cache", str(args.cache)] if args.cache else []
    cmd += ["--profile"] if args.profile else []
    for run_ in range(args.runs):
        for code in codes if run_ % 2 == 0 else codes[::-1]:
            load = " ".join(Path("/proc/loadavg").read_text().split()[:3])
            env = run.child_env()
            env["PYTHONPATH"] = str(code)
            out = subprocess.run(cmd, env=env, cwd=code, capture_output=True, text=True)
            if out.returncode:
                sys.stderr.write(out.stderr)
                return 1
            result = json.loads(out.stdout.splitlines()[-1])
            result["load"] = load
            got[code].append(result)
            figures = result["figures"]
            app = next(iter(figures.values()))
            floor = figures[list(figures)[-1]]
            print(
                f"run {run_ + 1} {code.name} (load {load}; vouched {result['vouched']}): "
                f"app {app:.1f} µs, floor {floor:.1f} µs, app − floor {app - floor:.1f} µs; "
                f"{result['opcodes']['opcodes']:.0f} Python bytecodes and "
                f"{result['opcodes']['calls']:.0f} Python calls a request",
                flush=True,
            )
            if "profile" in result:
                print(result["profile"], flush=True)
    for code in codes:
        print(f"\n{code.name}: median of {args.runs} runs, thread CPU µs a request")
        names = list(got[code][0]["figures"])
        for name in names:
            values = [r["figures"][name] for r in got[code] if name in r["figures"]]
            print(f"  {statistics.median(values):7.1f}  {name}")
        app = [next(iter(r["figures"].values())) for r in got[code]]
        floor = [r["figures"][names[-1]] for r in got[code]]
        own = statistics.median(a - f for a, f in zip(app, floor, strict=True))
        print(f"  {own:7.1f}  app − floor")
    return 0


if __name__ == "__main__":
    sys.exit(main())
