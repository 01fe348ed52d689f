"""What the Archive's app and the resolver's app share over Flask: the protocol's error as a
response, and a bug answered as `error {internal error}`. The resolver imports this, not
the Archive's web stack."""

from __future__ import annotations

import logging

from flask import Flask, Response, request
from werkzeug.exceptions import HTTPException

from ..protocol.errors import error_body

TEXT = "text/plain; charset=us-ascii"


def error_response(reason: str, status: int = 400) -> Response:
    """The protocol's error as a text/plain response."""
    return Response(error_body(reason), status=status, content_type=TEXT)


def answer_unexpected_errors(app: Flask, logger: logging.Logger) -> None:
    """A bug answers `error {internal error}` (500) and is logged with its traceback; HTTP
    errors (404, 405 …) stay as Werkzeug made them."""

    @app.errorhandler(Exception)
    def unexpected(exc: Exception):
        if isinstance(exc, HTTPException):
            return exc
        logger.exception("unexpected error on %s", request.path)
        return error_response("internal error", 500)
