"""httpx transports that record each request they carry (see `pcache.record`).

They work with `httpx` and with its successor `httpx2` alike (SDKs use one or the other): the
module is the one the request comes from, and so is the default inner transport.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import AsyncIterator, Iterator
from functools import cache
from pathlib import Path
from types import ModuleType
from typing import Any

from pcache.record.line import PendingLine, SessionKey, begin_line, finish_line
from pcache.record.usage import UsageScanner, scanned
from pcache.record.writer import LineWriter

logger = logging.getLogger("pcache.record")


def http_module(value: object) -> ModuleType:
    """`httpx` or `httpx2`: the package an httpx object comes from."""
    return sys.modules[type(value).__module__.partition(".")[0]]


def _public_url(url: Any) -> str:
    """Scheme, host, port and path: no query (some APIs take keys there), no user info."""
    port = f":{url.port}" if url.port is not None else ""
    return f"{url.scheme}://{url.host}{port}{url.path}"


class _Recorder:
    """What the sync and async transports share: start a line, finish it once, write it."""

    def __init__(self, path: str | os.PathLike[str], session_id: SessionKey, redact: bool):
        self.writer = LineWriter(path)
        self.session_id = session_id
        self.redacted = None
        """Writes lines without the request's text (`redact=True`)."""
        if redact:
            from pcache.record.redacted import RedactedLines

            self.redacted = RedactedLines()

    def begin(self, request: Any, body: bytes) -> PendingLine | None:
        try:
            return begin_line(request.method, _public_url(request.url), body, self.session_id)
        except Exception:  # recording never fails a request
            logger.exception("pcache: cannot record a request")
            return None

    def finish(
        self, pending: PendingLine, status: int | None, usage: Any, response: Any = None
    ) -> None:
        finish = finish_line if self.redacted is None else self.redacted.finish
        try:
            self.writer.write(finish(pending, status, usage, response))
        except Exception:
            logger.exception("pcache: cannot record a request")

    def watch(self, pending: PendingLine, response: Any) -> _Watch | None:
        """Record now if the body is already in memory; else a watch over its stream."""
        try:
            content_type = response.headers.get("content-type", "")
            try:
                content = response.content
            except http_module(response).ResponseNotRead:
                encoding = response.headers.get("content-encoding", "")
                return _Watch(self, pending, response.status_code, content_type, encoding)
            scanner = scanned(content, content_type)
            self.finish(pending, response.status_code, scanner.usage, scanner.response)
        except Exception:
            logger.exception("pcache: cannot record a request")
        return None


class _Watch:
    """Feeds the chunks of one response to a usage scanner; writes the line when it ends."""

    def __init__(
        self,
        recorder: _Recorder,
        pending: PendingLine,
        status: int,
        content_type: str,
        content_encoding: str,
    ):
        self.recorder, self.pending, self.status = recorder, pending, status
        self.scanner = UsageScanner(content_type, content_encoding)
        self.done = False

    def feed(self, chunk: bytes) -> None:
        try:
            self.scanner.feed(chunk)
        except Exception:
            logger.exception("pcache: cannot read a response's usage")

    def end(self) -> None:
        if self.done:
            return
        self.done = True
        try:
            usage = self.scanner.finish()
        except Exception:
            usage = None
        self.recorder.finish(self.pending, self.status, usage, self.scanner.response)


class _WatchedStream:
    """The response's own stream, chunks passed on as they come, seen by a `_Watch`."""

    def __init__(self, inner: Any, watch: _Watch):
        self.inner, self.watch = inner, watch

    def __iter__(self) -> Iterator[bytes]:
        for chunk in self.inner:
            self.watch.feed(chunk)
            yield chunk
        self.watch.end()

    def close(self) -> None:
        try:
            self.inner.close()
        finally:
            self.watch.end()


class _AsyncWatchedStream:
    def __init__(self, inner: Any, watch: _Watch):
        self.inner, self.watch = inner, watch

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for chunk in self.inner:
            self.watch.feed(chunk)
            yield chunk
        self.watch.end()

    async def aclose(self) -> None:
        try:
            await self.inner.aclose()
        finally:
            self.watch.end()


@cache
def _stream_class(watched: type, base: type) -> type:
    """`watched` made a subclass of the module's byte-stream base, which httpx checks for."""
    return type(watched.__name__, (watched, base), {})


class _RecordingTransport:
    def __init__(
        self,
        path: str | os.PathLike[str],
        transport: Any = None,
        *,
        session_id: SessionKey = None,
        redact: bool = False,
    ):
        self.inner = transport
        self.recorder = _Recorder(path, session_id, redact)

    @property
    def path(self) -> Path:
        return self.recorder.writer.path


class Transport(_RecordingTransport):
    """Records every request sent through `transport` (default: httpx's own) to JSONL `path`.

    `session_id` is a fixed id or a function of the request body. Requests that never got a
    response are not recorded (no cache saw them), nor are bodies pcache cannot read.
    `redact`: lines without the request's text (`pcache.record.redacted`: token counts and
    block hashes, which `pcache replay` reads).
    """

    def handle_request(self, request: Any) -> Any:
        http = http_module(request)
        if self.inner is None:
            self.inner = http.HTTPTransport()
        pending = None
        if "json" in request.headers.get("content-type", ""):
            try:
                body = request.content
            except http.RequestNotRead:
                body = request.read()
            pending = self.recorder.begin(request, body)
        response = self.inner.handle_request(request)
        if pending is not None:
            watch = self.recorder.watch(pending, response)
            if watch is not None:
                stream_type = _stream_class(_WatchedStream, http_module(response).SyncByteStream)
                response.stream = stream_type(response.stream, watch)
        return response

    def close(self) -> None:
        try:
            if self.inner is not None:
                self.inner.close()
        finally:
            self.recorder.writer.close()

    def __enter__(self) -> Transport:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


class AsyncTransport(_RecordingTransport):
    """The asyncio twin of `Transport` (default inner transport: httpx's AsyncHTTPTransport)."""

    async def handle_async_request(self, request: Any) -> Any:
        http = http_module(request)
        if self.inner is None:
            self.inner = http.AsyncHTTPTransport()
        pending = None
        if "json" in request.headers.get("content-type", ""):
            try:
                body = request.content
            except http.RequestNotRead:
                body = await request.aread()
            pending = self.recorder.begin(request, body)
        response = await self.inner.handle_async_request(request)
        if pending is not None:
            watch = self.recorder.watch(pending, response)
            if watch is not None:
                base = http_module(response).AsyncByteStream
                response.stream = _stream_class(_AsyncWatchedStream, base)(response.stream, watch)
        return response

    async def aclose(self) -> None:
        try:
            if self.inner is not None:
                await self.inner.aclose()
        finally:
            self.recorder.writer.close()

    async def __aenter__(self) -> AsyncTransport:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()
