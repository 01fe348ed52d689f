"""The headers that keep what a browser runs away from the Archive's own origin.

A deposited file is someone else's: an HTML, SVG or XML file served inline from the
Archive's origin ran its scripts as the Archive, so it could read a licensed item's file the
user may have (a same-origin read) and send it elsewhere. Such files are served with
`Content-Security-Policy: sandbox` (no script, an origin of their own); an Archive whose
deposited pages must run their scripts publishes its files on another origin (`url_base`).
Every answer says `nosniff`, so no file is read as a type it was not served as; the pages
also keep out of others' frames and keep their queries out of other sites' logs."""

from __future__ import annotations

import base64
import hashlib
import mimetypes
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # Flask only for `install`: a CGI download imports none (web/cgi.py)
    from flask import Flask

NOSNIFF = ("X-Content-Type-Options", "nosniff")
SANDBOX = ("Content-Security-Policy", "sandbox")
# The pages' own needs: inline style, their images, the search form; nothing else.
PAGE_POLICY = (
    "default-src 'none'; style-src 'unsafe-inline'; img-src 'self' data:; "
    "form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
)


# A compressed file is described as what its bytes are: told `Content-Encoding: gzip`, a
# browser saved a .tar.gz decompressed under its .gz name; told application/x-tar, it had
# gzip bytes under a tar's type. SVG is the exception Apache's AddEncoding makes: a .svgz
# is an image the browser inflates and shows.
_COMPRESSED = {
    "gzip": "application/gzip",
    "bzip2": "application/x-bzip2",
    "xz": "application/x-xz",
    "compress": "application/x-compress",
    "br": "application/x-brotli",
}
_SHOWN_INFLATED = {("image/svg+xml", "gzip")}


def media_type(name: str) -> tuple[str, str | None]:
    """The Content-Type a file named `name` is served with, and its Content-Encoding."""
    kind, encoding = mimetypes.guess_type(name)
    if encoding is None:
        return kind or "application/octet-stream", None
    if (kind, encoding) in _SHOWN_INFLATED:
        return kind, encoding
    return _COMPRESSED.get(encoding, "application/octet-stream"), None


def script_hash(script: str) -> str:
    """A CSP source that allows exactly one inline script (CSP Level 2's hash source)."""
    digest = hashlib.sha256(script.encode("utf-8")).digest()
    return f"'sha256-{base64.b64encode(digest).decode('ascii')}'"


def page_headers(scripts: tuple[str, ...] = ()) -> tuple[tuple[str, str], ...]:
    """The headers of every page: its policy allows the inline `scripts` given and no other."""
    policy = PAGE_POLICY
    if scripts:
        policy += "; script-src " + " ".join(script_hash(s) for s in scripts)
    return (NOSNIFF, ("Content-Security-Policy", policy), ("Referrer-Policy", "same-origin"))


PAGE_HEADERS = page_headers()
# What a browser runs as a document of its origin: markup with scripts (HTML, XHTML, SVG,
# XML through XSLT or its namespaces).
SCRIPTED = frozenset(
    ("text/html", "application/xhtml+xml", "image/svg+xml", "text/xml", "application/xml")
)


def runs_scripts(mimetype: str) -> bool:
    """Whether a document served as `mimetype` may run scripts in a browser."""
    kind = mimetype.partition(";")[0].strip().lower()
    return kind in SCRIPTED or kind.endswith("+xml") or kind.endswith("/xslt")


def file_headers(mimetype: str) -> list[tuple[str, str]]:
    """The headers of a collection's file served as `mimetype` (by this app, or by the proxy
    it hands the file to: contrib's nginx repeats them from the app's answer)."""
    return [NOSNIFF, SANDBOX] if runs_scripts(mimetype) else [NOSNIFF]


def secure(response, *, file: bool, pages=PAGE_HEADERS) -> None:
    """Give a (Werkzeug) `response` its headers: a collection's file (`file`, below 400) its
    own, any other answer (pages, their errors, JSON) the `pages` headers."""
    if file and response.status_code < 400:
        wanted = file_headers(response.mimetype or "")
    else:
        wanted = pages
    for name, value in wanted:  # a view's own choice stands (a stricter Referrer-Policy)
        response.headers.setdefault(name, value)


def install(app: Flask, files_endpoint: str, scripts: tuple[str, ...] = ()) -> None:
    """Give every answer of `app` its headers (`secure`): a file of `files_endpoint` its own,
    any other the pages', which allow the inline `scripts` only."""
    from flask import request

    pages = page_headers(scripts)

    @app.after_request
    def secured(response):
        secure(response, file=request.endpoint == files_endpoint, pages=pages)
        return response
