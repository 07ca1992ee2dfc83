"""Who may use `pcache serve`: `--api-key` (vLLM's `--api-key`) and the admin routes.

With a key, every route but `/health` (and `/metrics`, unless `--metrics-auth`) needs
`Authorization: Bearer KEY`; the key is compared in constant time (`hmac.compare_digest`), and
a request without it gets OpenAI's 401 (`invalid_api_key`) before any route reads its body.
The admin routes (`/reset_prefix_cache`, `/flush_cache`) are open to whoever may use the
server: with a key, to its holders; without one, only when the server listens on loopback or
`--enable-admin-routes` was given (`ServeOptions.admin_routes`), else they answer 403.
"""

from __future__ import annotations

import hmac
from typing import Any

from pcache.serve.api_error import ApiError
from pcache.serve.error_response import error_response

OPEN_ROUTES = frozenset({"/health"})
METRICS_ROUTES = frozenset({"/metrics"})
ADMIN_ROUTES = frozenset({"/reset_prefix_cache", "/flush_cache"})


def missing_key() -> ApiError:
    message = (
        "You didn't provide an API key. You need to provide your API key in an Authorization"
        " header using Bearer auth (i.e. Authorization: Bearer YOUR_KEY)."
    )
    return ApiError(401, message, "invalid_request_error", code="invalid_api_key")


def wrong_key() -> ApiError:
    message = "Incorrect API key provided."
    return ApiError(401, message, "invalid_request_error", code="invalid_api_key")


def admin_closed(path: str) -> ApiError:
    message = (
        f"{path} is an admin route: this server listens beyond loopback without --api-key;"
        " start it with --api-key or --enable-admin-routes"
    )
    return ApiError(403, message, "permission_error", code="admin_routes_disabled")


def bearer_token(headers: list[tuple[bytes, bytes]]) -> bytes | None:
    """The token of the request's `Authorization: Bearer TOKEN` header, or None."""
    for name, value in headers:
        if name.lower() == b"authorization":
            scheme, _, token = value.strip().partition(b" ")
            if scheme.lower() == b"bearer":
                return token.strip()
            return None
    return None


class AccessControl:
    """ASGI middleware: the key on every guarded route, the admin routes' rule."""

    def __init__(
        self,
        app: Any,
        api_key: str | None,
        metrics_auth: bool = False,
        admin_routes: bool = True,
    ) -> None:
        self.app = app
        self.key = None if api_key is None else api_key.encode()
        self.open_routes = OPEN_ROUTES if metrics_auth else OPEN_ROUTES | METRICS_ROUTES
        self.admin_routes = admin_routes

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            refusal = self.refusal(scope)
            if refusal is not None:
                headers = {"www-authenticate": "Bearer"} if refusal.status == 401 else None
                await error_response(refusal, headers)(scope, receive, send)
                return
        await self.app(scope, receive, send)

    def refusal(self, scope: dict) -> ApiError | None:
        """Why this request may not go on, or None."""
        path = scope.get("path", "")
        if path in self.open_routes:
            return None
        if self.key is not None:
            token = bearer_token(scope.get("headers", []))
            if token is None:
                return missing_key()
            if not hmac.compare_digest(token, self.key):
                return wrong_key()
            return None
        if path in ADMIN_ROUTES and not self.admin_routes:
            return admin_closed(path)
        return None


def is_loopback(host: str) -> bool:
    """Whether an address to bind reaches only this machine (`localhost`, 127.0.0.0/8, ::1)."""
    import ipaddress

    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False
