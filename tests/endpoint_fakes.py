"""Small servers on loopback for `replay --endpoint` tests: a real socket, a real HTTP/1.0
exchange written byte for byte by the test, so a response can be anything a hostile or
broken server sends (trickles, bombs, odd shapes). Stopped when the block ends."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import orjson

Reply = tuple[int, dict[str, str], Iterator[bytes] | bytes]
"""(status, headers, body: bytes or pieces written one after the other); status 0: say
nothing, ever."""
Handler = Callable[[str, str, bytes], Reply]
"""(method, path, request body) -> the reply."""

MAX_SERVE_S = 20.0
"""A trickling reply stops after this long even when nobody closes it."""


def sse(*chunks, done: bool = True) -> bytes:
    pieces = [
        b"data: " + (c if isinstance(c, bytes) else orjson.dumps(c)) + b"\n\n" for c in chunks
    ]
    return b"".join(pieces) + (b"data: [DONE]\n\n" if done else b"")


def completion_stream(prompt_tokens: int, cached: int | None, text: str = "ok") -> bytes:
    usage: dict = {"prompt_tokens": prompt_tokens, "completion_tokens": 2}
    if cached is not None:
        usage["prompt_tokens_details"] = {"cached_tokens": cached}
    pieces = [{"choices": [{"index": 0, "text": piece}]} for piece in (text[:1], text[1:])]
    return sse(*pieces, {"choices": [], "usage": usage})


def chat_stream(prompt_tokens: int, cached: int | None) -> bytes:
    usage: dict = {"prompt_tokens": prompt_tokens, "completion_tokens": 2}
    if cached is not None:
        usage["prompt_tokens_details"] = {"cached_tokens": cached}
    pieces = [{"choices": [{"index": 0, "delta": {"content": piece}}]} for piece in ("o", "k")]
    return sse(*pieces, {"choices": [], "usage": usage})


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.0"
    handle_reply: Handler

    def log_message(self, *args) -> None:  # quiet
        pass

    def _serve(self, method: str) -> None:
        length = int(self.headers.get("content-length") or 0)
        body = self.rfile.read(length) if length else b""
        status, headers, content = self.server.handle_reply(method, self.path, body)  # type: ignore[attr-defined]
        if status == 0:  # never answer at all (not even a status line)
            time.sleep(MAX_SERVE_S)
            return
        self.send_response(status)
        for name, value in headers.items():
            self.send_header(name, value)
        self.end_headers()
        pieces = [content] if isinstance(content, bytes) else content
        stop = time.monotonic() + MAX_SERVE_S
        try:
            for piece in pieces:
                self.wfile.write(piece)
                self.wfile.flush()
                if time.monotonic() > stop:
                    break
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up on it: that is the point

    def do_GET(self) -> None:
        self._serve("GET")

    def do_POST(self) -> None:
        self._serve("POST")


@contextlib.contextmanager
def fake_server(handle: Handler):
    """The base URL (http://127.0.0.1:PORT) of a server answering with `handle`."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    server.daemon_threads = True
    server.handle_reply = handle  # type: ignore[attr-defined]
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05})
    thread.daemon = True
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)
        assert not thread.is_alive(), "the fake server did not stop"
