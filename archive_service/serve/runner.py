"""Run the app under gunicorn, the real server (not Flask's development server)."""

from __future__ import annotations

import gc
import logging
import os
import signal
import socket
from collections.abc import Callable

from gunicorn.app.base import BaseApplication

from .. import settings
from ..common import limits, metrics, net
from ..common.worker import (
    STOP_SIGNALS,
    ClientTimeoutWorker,
    Logger,
    mount_from_config_only,
    unblock_stop_signals,
)
from ..indexer import startup
from . import announce, announcer, identity, lifecycle

log = logging.getLogger(__name__)


class ArchiveServer(BaseApplication):
    """gunicorn with our settings; the app is built once in the master, before workers fork."""

    def __init__(
        self, config: settings.Config, reload_config: Callable[[], settings.Config] | None = None
    ):
        self.config = config
        self.reload_config = reload_config
        self.announced = announce.from_config(config)
        self.lifecycle = lifecycle.Lifecycle(
            self.announced, config.state_dir, announce.silence(config), config.database
        )
        super().__init__()

    def load_config(self) -> None:
        self.cfg.set("bind", [self.config.bind])
        self.cfg.set("workers", self.config.workers)
        # Threads, so that a slow client holds one thread, not a whole process; and the
        # heartbeat (gunicorn's timeout) comes from the worker's loop, not from the request,
        # so a long download no longer gets its worker killed mid-send (sync workers did
        # at 30 s). ClientTimeoutWorker drops clients that stall.
        self.cfg.set("worker_class", ClientTimeoutWorker)
        self.cfg.set("threads", self.config.threads)
        # gunicorn's sendfile path does not count what it sends (the access log said 0 for
        # every file); web._send hands it 64 KB blocks instead, which it counts.
        self.cfg.set("sendfile", False)
        mount_from_config_only(self.cfg)
        # Build the index once and share it copy-on-write; start-up errors stop the master.
        self.cfg.set("preload_app", True)
        self.cfg.set("proc_name", "archive-service")
        self.cfg.set("accesslog", "-")
        self.cfg.set("errorlog", "-")
        self.cfg.set("logger_class", Logger)
        # Each Archive is its own service: no shared gunicorn control socket to fight over.
        self.cfg.set("control_socket_disable", True)
        # Join the resolution system once per start and leave it on exit (announce.py: why here).
        self.cfg.set("when_ready", self._when_ready)
        self.cfg.set("on_reload", self._on_reload)
        self.cfg.set("on_exit", self._on_exit)
        # Oversized requests stop here (414/431); the app checks again for other servers.
        self.cfg.set("limit_request_line", limits.MAX_REQUEST_LINE)
        self.cfg.set("limit_request_field_size", limits.MAX_HEADER_FIELD)
        self.cfg.set("limit_request_fields", limits.MAX_HEADER_FIELDS)
        self.cfg.set("pre_fork", _before_fork)
        self.cfg.set("post_worker_init", _follow_collection)
        self.cfg.set("worker_exit", _flush_uses)
        self.cfg.set("child_exit", metrics.child_exit)  # a dead worker's live gauges forgotten

    @property
    def client_timeout(self) -> float:
        return self.config.client_timeout

    def load(self):
        return self._build(self.config)

    @staticmethod
    def _build(config: settings.Config):
        from ..web import create_app

        return create_app(config)

    def reload(self) -> None:
        """SIGHUP: read the settings again and rebuild the app; keep the running ones on error."""
        if self.reload_config is not None:
            try:
                config = self.reload_config()
                if config.bind != self.config.bind:
                    _can_listen(config.bind, self.config.bind)
                announced = announce.from_config(config)
                app = self._build(config)
            except Exception as exc:  # a bad edit must not take the running Archive down
                log.error("reload: still serving the previous settings: %s", exc)
            else:
                self.config, self.callable, self.announced = config, app, announced
        super().reload()

    def _when_ready(self, arbiter) -> None:
        startup.reap_early()
        self.lifecycle.start(announcer.Local.of_socket(arbiter.LISTENERS[0].sock))

    def _on_reload(self, arbiter) -> None:
        self.lifecycle.reload(
            self.announced,
            announcer.Local.of_socket(arbiter.LISTENERS[0].sock),
            self.config.state_dir,
            announce.silence(self.config),
            self.config.database,
        )

    def _on_exit(self, arbiter) -> None:
        self.lifecycle.leave(handing_over=bool(arbiter.reexec_pid))


def _can_listen(bind: str, old: str) -> None:
    """Raise OSError unless the new `bind` can be listened on. gunicorn's reload closes its
    listeners first and, when the new address fails, the master exits: a SIGHUP naming a busy
    port took the running Archive down instead of keeping the old settings."""
    from gunicorn.util import parse_address

    address = parse_address(bind)
    if isinstance(address, str):  # unix:PATH: gunicorn removes a stale socket file itself
        return
    previous = parse_address(old)
    if not isinstance(previous, str) and previous[1] == address[1]:
        return  # the same port on another host: free once gunicorn closes the old listener
    host, port = address
    try:
        family, kind, proto, _, sockaddr = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[
            0
        ]
        with socket.socket(family, kind, proto) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            probe.bind(sockaddr)
    except OSError as exc:
        raise OSError(f"cannot listen on {bind} (setting bind): {exc}") from None


def _freeze_heap(arbiter, worker) -> None:
    """Before each fork: what the master built (Flask, the app, the modules) is kept by every
    worker for good; frozen, the workers' garbage collections no longer walk it (a full
    collection took 20-45 ms of a worker's time, the tail of the bench's latencies) and its
    pages stay shared with the master."""
    gc.freeze()


def _before_fork(arbiter, worker) -> None:
    _freeze_heap(arbiter, worker)
    signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)  # until the worker's handlers are set


def _follow_collection(worker) -> None:
    """After the fork, in every worker: keep the collection's indexer process running (the
    first worker to take the index's lock starts it; the others stand by to replace it)."""
    live = getattr(worker.wsgi, "extensions", {}).get("archive_index")
    if live is not None:  # None: the app failed to load, and gunicorn serves its error page
        live.follow(lambda: worker.alive)  # a stopping worker starts no indexer


def _flush_uses(arbiter, worker) -> None:
    """A worker that stops writes the COUNTER uses it buffered (stores/stats/). gunicorn also
    calls this in the master for a worker it reaped, which buffered nothing there, and for a
    worker stopped before it loaded the app (no `wsgi` yet)."""
    metrics.flush()  # and the counts of its metrics
    store = getattr(getattr(worker, "wsgi", None), "extensions", {}).get("stats")
    if store is not None:
        store.flush()


def root_warning(config: settings.Config) -> str | None:
    """What an admin trying `sudo archive-service serve` should know: the service needs no
    privilege, and what it writes now belongs to root (the systemd unit's user, whose state
    directory root's default is, cannot then write its index or read its URL-key secret)."""
    if os.geteuid() != 0:
        return None
    return (
        f"serve runs as root, which it never needs (it listens on a high port behind the web "
        f"server): what it writes in state_dir {config.state_dir} belongs to root, and a "
        "service running as its own user (contrib/systemd: archive-service) cannot then "
        "write it; run it as that user (sudo -u archive-service archive-service serve …), "
        f"or chown -R that user {config.state_dir} afterwards"
    )


def proxy_warning(config: settings.Config) -> str | None:
    """serve's warning of no proxy in front (common/net.py, the resolver's too)."""
    return net.proxy_warning("serve", config.bind, config.trusted_proxies)


def run(config: settings.Config, reload_config: Callable[[], settings.Config] | None = None) -> int:
    for line in identity.describe(config):
        log.info("%s", line)
    for warning in (
        root_warning(config),
        identity.trial_warning(config),
        proxy_warning(config),
    ):
        if warning:
            log.warning("%s", warning)
    log.info(
        "serving %s at http://%s/%s (listening on %s, %d workers)",
        config.collection,
        config.archiveaddress,
        config.archiveserviceibi,
        config.bind,
        config.workers,
    )
    os.register_at_fork(after_in_parent=unblock_stop_signals)  # blocked by _before_fork
    if config.metrics_allow:  # before the app is made: the workers' counts add up there
        metrics.use_directory(config.state_dir, "metrics")
    ArchiveServer(config, reload_config).run()
    return 0
