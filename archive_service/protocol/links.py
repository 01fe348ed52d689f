"""Where an Archive publishes its items' files and pages (`Links`): every URL an answer or a
page hands out, absolute, from `archiveaddress` and the WSGI mount point."""

from __future__ import annotations

from urllib.parse import quote

from .catalog import DOC, Item


class Links:
    """Where the Archive publishes item files and pages; every URL is absolute.

    `site` is `http://<archiveaddress>` plus the WSGI mount point (SCRIPT_NAME); `url_base`,
    when configured, is where an existing web server publishes the collection's files.
    """

    _SAFE = "/@:!$&'()*+,;=-._~"

    def __init__(self, site: str, service_path: str, url_base: str | None = None):
        self.site = site.rstrip("/")
        self.service = self.site + self.path(service_path)
        self.files = url_base.rstrip("/") if url_base else self.site + "/col"

    @classmethod
    def path(cls, text: str) -> str:
        # File names are bytes on disk; surrogates (os.fsdecode) go back to those bytes.
        return quote(text.encode("utf-8", "surrogateescape"), safe=cls._SAFE)

    def file(self, item: Item, relpath: str) -> str:
        return f"{self.files}/{self.path(item.directory)}/{DOC}/{self.path(relpath)}"

    def filelist(self, item: Item) -> str:
        return f"{self.service}/filelist/{self.path(item.directory)}"

    def metadata(self, item: Item, fmt: str | None) -> str:
        url = f"{self.service}/metadata/{self.path(item.directory)}"
        return f"{url}?format={fmt}" if fmt else url

    def landing(self, item: Item) -> str:
        """The item's landing page (SPEC §8), named by the IBI its directory has."""
        return self.item_url(item.name.text)

    def item_url(self, ibi: str) -> str:
        return f"{self.service}/item/{self.path(ibi)}"

    def linkset(self, item: Item, json: bool = False) -> str:
        """The item's FAIR Signposting linkset (RFC 9264): application/linkset, or +json."""
        return f"{self.service}/linkset{'.json' if json else ''}/{self.path(item.name.text)}"

    @property
    def about(self) -> str:
        """The page describing the Archive's service, the service's own item (§7.1): under
        the service's path, which every deployment forwards (contrib/)."""
        return f"{self.service}/about"
