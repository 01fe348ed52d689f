"""What the Archive's app and the resolver's app share over Flask: the protocol's error as a
response, and a bug answered as `error {internal error}`. The resolver imports this, not
the Archive's web stack."""

from __future__ import annotations

import logging

from flask import Flask, Response, render_template, request
from flask_babel import gettext
from werkzeug.exceptions import HTTPException

from .common import i18n
from .common.logs import shown
from .protocol.errors import error_body
from .protocol.pairs import TEXT

HTML = "text/html; charset=utf-8"


def error_response(reason: str, status: int = 400) -> Response:
    """The protocol's error as a text/plain response."""
    return Response(error_body(reason), status=status, content_type=TEXT)


def http_error_words(code: int) -> tuple[str, str]:
    """The title and explanation of an HTTP error's page, in the request's language."""
    words = {
        400: (gettext("Bad request"), gettext("The request could not be understood.")),
        403: (gettext("Forbidden"), gettext("This page or file is not served to you.")),
        404: (
            gettext("Not found"),
            gettext("Nothing is here. Check the address, or start from the Archive's page."),
        ),
        405: (gettext("Method not allowed"), gettext("This address does not take that method.")),
        413: (gettext("Request too large"), gettext("The request is larger than allowed.")),
        416: (gettext("Range not satisfiable"), gettext("The file has no such range of bytes.")),
        503: (
            gettext("Service unavailable"),
            gettext("The service cannot answer now. Please try again later."),
        ),
    }
    return words.get(code, (gettext("Error"), gettext("The request could not be answered.")))


def error_page(exc: HTTPException) -> Response:
    """An HTTP error (404, 405 …) as a page of the app, in the request's language, with the
    headers Werkzeug gives it (Allow, Content-Range …). A description given to `abort` is the
    caller's (translated there); Werkzeug's own English ones are replaced."""
    response = exc.get_response()
    title, description = http_error_words(response.status_code)
    if exc.description and exc.description != type(exc).description:
        description = exc.description
    i18n.elsewhere()
    page = render_template("error.html", title=title, description=description, code=exc.code)
    response.set_data(page)
    response.content_type = HTML
    return response


def answer_unexpected_errors(app: Flask, logger: logging.Logger) -> None:
    """A bug answers `error {internal error}` (500) and is logged with its traceback; HTTP
    errors (404, 405 …) are pages (`error_page`); redirects stay as Werkzeug made them."""

    @app.errorhandler(Exception)
    def unexpected(exc: Exception):
        if isinstance(exc, HTTPException):
            return error_page(exc) if exc.code and exc.code >= 400 else exc
        logger.exception("unexpected error on %s", shown(request.path))
        return error_response("internal error", 500)
