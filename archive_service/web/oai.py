"""The OAI-PMH endpoint, `/<archiveserviceibi>/oai` (issue 33): a Flask blueprint over
oai/provider.py. Its baseURL, and every URL in its records, come from `archiveaddress` and
the mount point (SCRIPT_NAME), never from the Host header."""

from __future__ import annotations

from collections.abc import Callable
from urllib.parse import urlsplit

from flask import Blueprint, Response, request

from .. import settings
from ..collection.items import resolve_file
from ..index.catalog import StoreCatalog
from ..oai.provider import Provider, Repository
from ..oai.tokens import PURPOSE, Tokens
from ..protocol.answers import Links
from ..protocol.urlkeys import UrlKeys

XML = "text/xml; charset=utf-8"


def oai_blueprint(
    provider: Provider, service_path: str, links: Callable[[dict], Links]
) -> Blueprint:
    """The route at `<service_path>/oai` (GET and POST, as §3.1.1.1 has it); `links(environ)`
    gives the request's `Links` (create_app's)."""
    blueprint = Blueprint("oai", __name__)

    @blueprint.route(service_path + "/oai", methods=["GET", "POST"], endpoint="oai")
    def oai() -> Response:
        args = request.form if request.method == "POST" else request.args
        site = links(request.environ)
        body = provider.answer(list(args.items(multi=True)), site, site.service + "/oai")
        return Response(body, content_type=XML)

    return blueprint


def oai_provider(config: settings.Config, catalog: StoreCatalog, keys: UrlKeys) -> Provider:
    """The Archive's provider: its tokens signed with a key derived from the URL-key secret
    (in state_dir, or the one every node shares in the database)."""
    host = urlsplit("http://" + config.archiveaddress).hostname or config.archiveaddress
    repository = Repository(
        name=f"Archive {config.archiveserviceibi} at {config.archiveaddress}",
        host=host,
        # Identify needs one; postmaster is the address every mail domain keeps (RFC 5321).
        admin_email=config.archiveadmemailaddress or f"postmaster@{host}",
    )
    return Provider(
        catalog, Tokens(keys.derive(PURPOSE)), repository, config.resolver, resolve_file
    )
