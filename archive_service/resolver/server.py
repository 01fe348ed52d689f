"""Run the resolver under gunicorn with threaded workers: a resolution mostly waits on
Archives, so threads (not processes) carry the concurrency."""

from __future__ import annotations

import logging

from gunicorn.app.base import BaseApplication

from .. import settings
from ..common import metrics
from ..common.net import proxy_warning
from ..common.worker import ClientTimeoutWorker, Logger, mount_from_config_only

log = logging.getLogger(__name__)

# Seconds a stopping worker gives its queued acknowledgments (under gunicorn's graceful_timeout
# of 30, which also covers the requests still being answered).
DRAIN = 10.0

# gunicorn's default, then where a resolution sent the user and the Archive that said so
# (resolver/app.py puts its service IBI in the request environ as archive_service.archive).
# ResolverLogger writes these lines itself (common/access.py); the format says what they are.
ACCESS_LOG_FORMAT = (
    '%(h)s %(l)s %(u)s %(t)s "%(r)s" %(s)s %(b)s "%(f)s" "%(a)s" "%({location}o)s" '
    "%({archive_service.archive}e)s"
)


class ResolverLogger(Logger):
    extras = (
        ("location", '"{}"', "o", "location"),
        ("archive", "{}", "e", "archive_service.archive"),
    )


class ResolverServer(BaseApplication):
    def __init__(self, config: settings.Config):
        self.config = config
        super().__init__()

    def load_config(self) -> None:
        self.cfg.set("bind", [self.config.bind])
        self.cfg.set("workers", self.config.workers)
        self.cfg.set("threads", self.config.threads)
        # gthread whose clients time out (common/worker.py): a slowloris client
        # held one of its threads for ever, and `threads` of them held the resolver.
        self.cfg.set("worker_class", ClientTimeoutWorker)
        mount_from_config_only(self.cfg)
        # Open the registry once before forking so a bad state directory stops start-up.
        self.cfg.set("preload_app", True)
        self.cfg.set("proc_name", "archive-service-resolver")
        self.cfg.set("accesslog", "-")
        self.cfg.set("access_log_format", ACCESS_LOG_FORMAT)
        self.cfg.set("errorlog", "-")
        # Its access log hides registration keys (in inclusion and exclusion URLs).
        self.cfg.set("logger_class", ResolverLogger)
        self.cfg.set("control_socket_disable", True)
        self.cfg.set("worker_exit", self.worker_exit)
        self.cfg.set("child_exit", metrics.child_exit)  # a dead worker's live gauges forgotten
        # A resolution may take `rounds` x `timeout` seconds; the worker must outlive it.
        self.cfg.set("timeout", max(30, int(self.config.rounds * (self.config.timeout + 1)) + 5))

    @property
    def client_timeout(self) -> float:
        # As long as an Archive gets to answer: a browser sends its request at once, and
        # the resolver's pages and redirects are small.
        return max(self.config.timeout, 1.0)

    def worker_exit(self, server, worker) -> None:
        """A stopping worker sends what acknowledgments it has queued (its sender threads die
        with it), then writes its last counts."""
        self.acknowledgments.drain(DRAIN)
        metrics.worker_exit(server, worker)

    def load(self):
        from ..common import postgres
        from .app import create_resolver_app

        app = create_resolver_app(self.config)
        self.acknowledgments = app.extensions["resolver"]["acknowledgments"]
        # The master opened the registry's database to check it; a libpq connection must not
        # cross the fork (a worker ending would close it under the master): each worker
        # opens its own pool on first use.
        postgres.close_all()
        return app


def run(config: settings.Config) -> int:
    log.info(
        "resolver listening on %s, service at /%s, registry in %s",
        config.bind,
        config.resolveribi,
        settings.postgres_redacted(config.database) if config.database else config.state_dir,
    )
    if warning := proxy_warning("resolver serve", config.bind, config.trusted_proxies):
        log.warning("%s", warning)
    if config.metrics_allow:  # before the app is made: the workers' counts add up there
        metrics.use_directory(config.state_dir, "metrics")
    ResolverServer(config).run()
    return 0
