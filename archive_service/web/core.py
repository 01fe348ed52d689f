"""What an Archive app is made of, with no web framework: its settings, its live index, the
`Archive` that answers the protocol from it, the URL keys and the statistics store, and the
`Links` of a request. create_app's `Site` (web/site.py) is this and the rules of its Flask
routes; contrib's CGI program (web/cgi.py) makes this alone for a protocol request, so that
such a process imports neither Flask, Jinja nor Werkzeug (issue 35)."""

from __future__ import annotations

import ipaddress
import os
from functools import cached_property, lru_cache
from pathlib import Path

from .. import settings
from ..collection import items
from ..common.net import client_address, persistent_url
from ..indexer.startup import LiveIndex
from ..indexer.vouch import Vouched
from ..protocol.answers import Archive, Links, client_allowed
from ..protocol.urlkeys import UrlKeys
from ..stores import stats, urlkeys
from ..stores.stats import counter

REQUIRED = ("collection", "archiveaddress", "archiveserviceibi")  # what an Archive app needs


def settings_from_env() -> settings.Config:
    """The settings of an app made by its server (gunicorn, mod_wsgi, CGI): the file named by
    ARCHIVE_SERVICE_CONFIG and the ARCHIVE_SERVICE_* variables."""
    return settings.load(os.environ.get("ARCHIVE_SERVICE_CONFIG"))


class Core:
    """The app's shared pieces; `catalog` is the live index's catalog."""

    def __init__(
        self,
        config: settings.Config,
        live: LiveIndex,
        archive: Archive,
        keys: UrlKeys,
        store: stats.Statistics,
    ):
        self.config = config
        self.live = live
        self.catalog = live.catalog
        self.archive = archive
        self.keys = keys
        self.store = store
        self.service_path = "/" + config.archiveserviceibi
        self.trusted = tuple(ipaddress.ip_network(n) for n in config.trusted_proxies)
        # One per mount point the app is reached at.
        self._links = lru_cache(maxsize=16)(self._links_at)

    @classmethod
    def open(cls, config: settings.Config, live: LiveIndex):
        """The pieces of an app serving `live`'s index (complete) with settings `config`."""
        # Both live in state_dir, or in the database every node shares; an unusable one is
        # logged and the service answers anyway.
        keys = urlkeys.of_archive(config.state_dir, config.database)
        store = stats.open_store(
            config.state_dir, config.database, retention_days=config.stats_retention_days
        )
        archive = Archive(
            live.catalog,
            config.archiveaddress,
            config.archiveserviceibi,
            config.platformsoftware,
            urlkeys=keys,
            resolve_file=items.resolve_file,
            current=Vouched(live.store),
        )
        return cls(config, live, archive, keys, store)

    def links(self, environ) -> Links:
        # The mount point as Werkzeug reads it (request.script_root), without a request object.
        root = environ.get("SCRIPT_NAME", "").encode("latin-1").decode(errors="replace")
        return self._links(root.rstrip("/"))

    @cached_property
    def real_root(self) -> Path:
        """The collection's real path (file_offload names files under it)."""
        return Path(self.catalog.root).resolve()

    def allows(self, item: items.Item, environ) -> bool:
        """Whether the request's client may have a licensed `item`'s files."""
        return client_allowed(item, client_address(environ, self.trusted))

    def record_use(self, item: items.Item, kind: str, environ) -> None:
        """What COUNTER counts of the pages and files served here (docs/counter.md); a HEAD
        fetches nothing. The store hashes the address: it is never kept."""
        if environ.get("REQUEST_METHOD") == "GET":
            address = client_address(environ, self.trusted)
            agent = environ.get("HTTP_USER_AGENT", "")
            access = counter.access_type(item.networks)
            self.store.record_use(
                stats.Seen(item.name.text, kind, str(address or ""), agent, access)
            )

    def member_link(self, item: items.Item, environ) -> str:
        """The Link header of a /col/ file or a metadata record: cite-as and collection
        (FAIR Signposting)."""
        from . import signposting  # citations/: only a request that sends one pays for it

        site = self.links(environ)
        cite_as = persistent_url(self.config.resolver, item.name.text) or site.landing(item)
        return signposting.member_header(cite_as, site.landing(item))

    def _links_at(self, script_root: str) -> Links:
        config = self.config
        return Links(
            "http://" + config.archiveaddress + script_root, self.service_path, config.url_base
        )
