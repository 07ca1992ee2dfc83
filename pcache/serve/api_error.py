"""The one error answer of `pcache serve`: OpenAI's `{"error": {message, type, param, code}}`."""

from __future__ import annotations

from typing import Any


class ApiError(Exception):
    """An OpenAI-style error answer: HTTP status, message, type and the offending parameter."""

    def __init__(
        self,
        status: int,
        message: str,
        error_type: str = "invalid_request_error",
        param: str | None = None,
        code: str | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.error_type = error_type
        self.param = param
        self.code = code
        """OpenAI's error code (`invalid_api_key`...); None: the HTTP status, as vLLM sends."""

    def __reduce__(self):  # pickled whole: the engine's process sends them to the server
        args = (self.status, self.message, self.error_type, self.param, self.code)
        return (type(self), args)

    def body(self) -> dict[str, Any]:
        return {
            "error": {
                "message": self.message,
                "type": self.error_type,
                "param": self.param,
                "code": self.status if self.code is None else self.code,
            }
        }


def bad_request(message: str, param: str | None = None) -> ApiError:
    return ApiError(400, message, param=param)


ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    405: "invalid_request_error",
    408: "timeout_error",
    409: "conflict",
    413: "invalid_request_error",
    422: "invalid_request_error",
    429: "rate_limit_exceeded",
    500: "internal_error",
    503: "service_unavailable",
}


def error_for_status(status: int, message: str) -> ApiError:
    """The OpenAI-shaped error of a bare HTTP status (routing's 404 and 405, a 500...)."""
    kind = ERROR_TYPES.get(status, "invalid_request_error" if status < 500 else "internal_error")
    return ApiError(status, message, kind)


def internal_error(error: BaseException) -> ApiError:
    """The 500 of an unexpected exception, named with its type."""
    return error_for_status(500, f"internal error: {type(error).__name__}: {error}")
