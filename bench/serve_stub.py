"""`archive-service serve` with one piece of the service's answer left (bench/urlrequest_cpu.py
`--stubs`): the same gunicorn, app, middleware and access log, so that the CPU a piece costs
in the server, where it costs several times what it costs in a loop in process, is the
difference between two servers measured side by side.

    python bench/serve_stub.py MODE SERVE-ARGS...

MODE: `constant` (the first request's real answer, replayed), `urlkey` (that answer with a
fresh urlkey each time: Rendered.body), `catalog` (the constant answer after the index's
begin, answer_cache and end, as a kept answer's request does them).
"""

from __future__ import annotations

import sys


def stub(mode: str, service):
    """The `answer(environ)` of `mode` over the real `service` (web/service.py Service)."""
    from archive_service.protocol import pairs
    from archive_service.protocol.answers import Rendered

    site, kept = service.site, []

    def first(environ) -> tuple[int, bytes]:
        if not kept:
            kept.append(service.answer(environ))
        return kept[0]

    def constant(environ):
        return first(environ)

    def urlkey(environ):
        status, body = first(environ)
        if len(kept) == 1:
            answer = [(n, v) for n, v in pairs.parse(body.decode()) if n != "urlkey"]
            kept.append(Rendered.of(answer))
        return status, kept[1].body(site.keys).encode("ascii")

    def catalog(environ):
        site.catalog.begin()
        try:
            site.catalog.answer_cache()
        finally:
            site.catalog.end()
        return first(environ)

    return {"constant": constant, "urlkey": urlkey, "catalog": catalog}[mode]


def main(argv: list[str]) -> int:
    from archive_service.cli import main as cli
    from archive_service.serve import runner
    from archive_service.web.service import ServiceEndpoint

    mode, build = argv[0], runner.ArchiveServer._build

    def stubbed(config):
        app = build(config)
        endpoint = app.wsgi_app
        while not isinstance(endpoint, ServiceEndpoint):
            endpoint = endpoint.app
        endpoint.answer = stub(mode, endpoint.answer.__self__)
        return app

    runner.ArchiveServer._build = staticmethod(stubbed)
    return cli(["serve", *argv[1:]])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
