"""The watch's HTTP server: `/metrics`, `/` (the live page), `/status.json` and `/health`.

The standard library's threaded server, on its own thread: it reads the watcher's latest
status (a value replaced after each poll, never changed) and never waits for a poll. A
connection that sends nothing for `READ_TIMEOUT_S` is closed, so idle clients hold no thread.

With a key (`--api-key`), every route but `/health` (and `/metrics`, unless `metrics_auth`)
needs `Authorization: Bearer KEY`, compared in constant time; without it the answer is 401.
"""

from __future__ import annotations

import hmac
import json
import threading
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from pcache.errors import UsageError
from pcache.watch import exposition, page
from pcache.watch.status import WatchStatus

READ_TIMEOUT_S = 10.0
"""Seconds a connection may stay silent before the server closes it."""
OPEN_ROUTES = frozenset({"/health"})


@dataclass(frozen=True, slots=True)
class Access:
    """Who may read the watch: `api_key` holders (None: anyone who reaches the port)."""

    api_key: str | None = None
    metrics_auth: bool = False
    """/metrics needs the key too (a Prometheus scrape config can send it)."""

    def allows(self, route: str, authorization: str | None) -> bool:
        if self.api_key is None or route in OPEN_ROUTES:
            return True
        if route == "/metrics" and not self.metrics_auth:
            return True
        scheme, _, token = (authorization or "").strip().partition(" ")
        if scheme.lower() != "bearer":
            return False
        return hmac.compare_digest(token.strip().encode(), self.api_key.encode())


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(
        self, address, handler, read: Callable[[], WatchStatus], refresh: int, access: Access
    ):
        import socket

        if ":" in address[0]:
            self.address_family = socket.AF_INET6
        super().__init__(address, handler)
        self.read = read
        self.refresh = refresh
        self.access = access


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    server_version = "pcache-watch"
    timeout = READ_TIMEOUT_S

    def do_GET(self) -> None:
        route = self.path.split("?", 1)[0]
        if not self.server.access.allows(route, self.headers.get("Authorization")):
            self._refuse()
            return
        status = self.server.read()
        if route == "/metrics":
            self._send(200, exposition.CONTENT_TYPE, exposition.render(status))
        elif route == "/":
            self._send(200, "text/html; charset=utf-8", page.render(status, self.server.refresh))
        elif route == "/status.json":
            self._send(200, "application/json", json.dumps(status.as_dict()))
        elif route == "/health":
            self._send(200, "text/plain; charset=utf-8", "ok\n")
        else:
            self._send(404, "text/plain; charset=utf-8", "not found: /, /metrics, /status.json\n")

    def _refuse(self) -> None:
        body = b'{"error": {"message": "missing or wrong API key", "code": "invalid_api_key"}}'
        self.send_response(401)
        self.send_header("Content-Type", "application/json")
        self.send_header("WWW-Authenticate", "Bearer")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _send(self, code: int, content_type: str, text: str) -> None:
        body = text.encode()
        self.send_response(code)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args) -> None:
        pass  # scrapes are not news


class StatusServer:
    """Serves `read()`'s status on `host:port` until `close`, to those `access` allows."""

    def __init__(
        self,
        host: str,
        port: int,
        read: Callable[[], WatchStatus],
        refresh: int,
        access: Access | None = None,
    ):
        try:
            self.httpd = _Server(
                (host.strip("[]"), port), _Handler, read, refresh, access or Access()
            )
        except OSError as error:
            raise UsageError(f"cannot listen on {host}:{port}: {error.strerror or error}") from None
        self.thread = threading.Thread(
            target=self.httpd.serve_forever, name="pcache-watch-http", daemon=True
        )

    @property
    def port(self) -> int:
        return self.httpd.server_address[1]

    def start(self) -> None:
        self.thread.start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
