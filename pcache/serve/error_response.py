"""The HTTP answer of an `ApiError`, and the exception handlers that give every error, whoever
raises it (Starlette's routing, an unexpected exception), that same OpenAI shape."""

from __future__ import annotations

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from pcache.serve.api_error import ApiError, error_for_status, internal_error


def error_response(error: ApiError, headers: dict[str, str] | None = None) -> JSONResponse:
    """The JSON answer of an error; a 429 or a 503 asks the client to retry in a second."""
    if error.status in (429, 503):
        headers = {**(headers or {}), "retry-after": "1"}
    return JSONResponse(error.body(), status_code=error.status, headers=headers)


async def http_error(request: Request, error: Exception) -> Response:
    """Starlette's own HTTP errors (no such route, a method not allowed) in OpenAI's shape."""
    assert isinstance(error, HTTPException)
    message = error.detail
    if error.status_code == 404:
        message = f"no route {request.url.path}"
    elif error.status_code == 405:
        message = f"{request.method} is not allowed on {request.url.path}"
    return error_response(error_for_status(error.status_code, str(message)), error.headers)


async def unexpected_error(request: Request, error: Exception) -> Response:
    """Any exception a route let through: a 500 named with its type."""
    return error_response(internal_error(error))


EXCEPTION_HANDLERS = {HTTPException: http_error, Exception: unexpected_error}
"""Starlette's `exception_handlers` of the app."""
