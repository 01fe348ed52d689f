"""The floors the benchmarks are measured against, each run as its own process.

    python bench/floors.py walk DIR        a bare os.scandir walk of the whole tree
    python bench/floors.py read DIR        the same walk, reading every item.yaml's bytes
    python bench/floors.py serve --bind HOST:PORT --workers N [--app flask|wsgi|sized]
                                 [--body-bytes N] [--header-names NAME,...]
                                           a constant text/plain endpoint under the same
                                           gunicorn settings as `archive-service serve`:
                                           a Flask app (flask), or a bare WSGI callable
                                           (wsgi: what the server alone costs, a 40-byte
                                           body; sized: a body of --body-bytes and the
                                           header fields named, those of serve's answer)

The floor server is `archive_service.serve.runner.ArchiveServer` itself with only `load()`
swapped for the constant app, so whatever gunicorn settings serve uses (workers, threads,
worker class, preload, access log), the floor uses too.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import tempfile

SIDECAR = "item.yaml"
CONSTANT = b"archiveaddress localhost\r\nstate Original"


def walk(root: str, read: bool = False) -> tuple[int, int]:
    """Visit every directory under `root` (not following links); optionally read sidecars."""
    dirs = sidecars = 0
    stack = [root]
    scandir = os.scandir
    while stack:
        path = stack.pop()
        dirs += 1
        with scandir(path) as entries:
            for entry in entries:
                if entry.is_dir(follow_symlinks=False):
                    stack.append(entry.path)
                elif read and entry.name == SIDECAR:
                    with open(entry.path, "rb") as stream:
                        stream.read()
                    sidecars += 1
    return dirs, sidecars


def constant_app():
    from flask import Flask, Response

    app = Flask("floor")

    @app.get("/", defaults={"path": ""})
    @app.get("/<path:path>")
    def constant(path: str) -> Response:
        return Response(CONSTANT, content_type="text/plain; charset=us-ascii")

    return app


def constant_wsgi():
    """The least a WSGI application can do: the same body and headers, nothing read."""
    headers = [
        ("Content-Type", "text/plain; charset=us-ascii"),
        ("Content-Length", str(len(CONSTANT))),
    ]

    def constant(environ, start_response):
        start_response("200 OK", headers)
        return [CONSTANT]

    return constant


def sized_wsgi(length: int, names: list[str]):
    """The raw WSGI floor answering like serve: a constant body of `length` bytes and the
    response header fields `names` (serve's answer's), so that what is left of serve's cost is
    the app's own work, not the bytes it sends or the fields gunicorn writes."""
    body = (CONSTANT + b"\r\n" + b"x" * length)[:length]
    values = {"content-type": "text/plain; charset=us-ascii", "content-length": str(length)}
    headers = [(name, values.get(name.lower(), "x")) for name in names]

    def constant(environ, start_response):
        start_response("200 OK", headers)
        return [body]

    return constant


APPS = {"flask": constant_app, "wsgi": constant_wsgi, "sized": sized_wsgi}


def serve(bind: str, workers: int, app: str = "flask", shape: tuple = ()) -> int:
    from archive_service import settings
    from archive_service.common.worker import unblock_stop_signals
    from archive_service.serve.runner import ArchiveServer

    class FloorServer(ArchiveServer):
        def load(self):
            return APPS[app](*shape)

    logging.basicConfig(
        level=logging.INFO,
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    empty = tempfile.mkdtemp(prefix="bench-floor-")
    config = settings.load(
        options={
            "collection": empty,
            "archiveaddress": "localhost",
            "archiveserviceibi": "sid.inpe.br/mtc-m18@80/2008/03.17.15.17",
            "resolver": "none",
            "state_dir": os.path.join(empty, "state"),
            "bind": bind,
            "workers": str(workers),
        },
        environ={},
    )
    # As serve's run(): the stop signals _before_fork blocks come back in the master after
    # each fork, else it never stops on SIGTERM.
    os.register_at_fork(after_in_parent=unblock_stop_signals)
    FloorServer(config).run()
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="benchmark floors")
    sub = parser.add_subparsers(dest="command", required=True)
    for name in ("walk", "read"):
        sub.add_parser(name).add_argument("root")
    srv = sub.add_parser("serve")
    srv.add_argument("--bind", required=True)
    srv.add_argument("--workers", type=int, default=2)
    srv.add_argument("--app", choices=sorted(APPS), default="flask")
    srv.add_argument("--body-bytes", type=int, default=len(CONSTANT), help="sized: its body")
    srv.add_argument("--header-names", default="Content-Type,Content-Length", help="sized")
    args = parser.parse_args(argv)
    if args.command == "serve":
        shape = (args.body_bytes, args.header_names.split(",")) if args.app == "sized" else ()
        return serve(args.bind, args.workers, args.app, shape)
    dirs, sidecars = walk(args.root, read=args.command == "read")
    print(f"{dirs} directories, {sidecars} sidecars read")
    return 0


if __name__ == "__main__":
    sys.exit(main())
