"""Run the app under gunicorn, the real server (not Flask's development server)."""

from __future__ import annotations

import logging

from gunicorn.app.base import BaseApplication

from . import settings

log = logging.getLogger(__name__)


class ArchiveServer(BaseApplication):
    """gunicorn with our settings; the app is built once in the master, before workers fork."""

    def __init__(self, config: settings.Config):
        self.config = config
        super().__init__()

    def load_config(self) -> None:
        self.cfg.set("bind", [self.config.bind])
        self.cfg.set("workers", self.config.workers)
        # Build the index once and share it copy-on-write; start-up errors stop the master.
        self.cfg.set("preload_app", True)
        self.cfg.set("proc_name", "archive-service")
        self.cfg.set("accesslog", "-")
        self.cfg.set("errorlog", "-")
        # Each Archive is its own service: no shared gunicorn control socket to fight over.
        self.cfg.set("control_socket_disable", True)

    def load(self):
        from .web import create_app

        return create_app(self.config)


def run(config: settings.Config) -> int:
    log.info("serving %s at http://%s/%s (listening on %s, %d workers)", config.collection,
             config.archiveaddress, config.archiveserviceibi, config.bind, config.workers)
    ArchiveServer(config).run()
    return 0
