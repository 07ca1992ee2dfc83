"""The `usage` of a provider response, read from a JSON body or from an SSE stream as it passes.

JSON bodies (OpenAI Chat Completions and Responses, Anthropic Messages) carry `usage` at the
top, Gemini `usageMetadata`. Streams carry it in events: OpenAI's last chunk
(`stream_options.include_usage`), the Responses API's `response.completed` (`response.usage`),
Anthropic's `message_start` (`message.usage`) and `message_delta` (`usage`, the output count),
Gemini's chunks (`usageMetadata`); later values win. A Responses API response also gives its
`id` and `output` items (`UsageScanner.response`). Only the current unfinished SSE line is
held, never the stream; a JSON body is copied up to a limit.
"""

from __future__ import annotations

import zlib
from typing import Any

import orjson

MAX_JSON_BYTES = 16 * 2**20


def usage_of(payload: Any) -> dict[str, Any] | None:
    """The usage object of a response JSON value or one stream event, if it has one."""
    if not isinstance(payload, dict):
        return None
    for holder in (payload, payload.get("message"), payload.get("response")):
        if isinstance(holder, dict) and isinstance(holder.get("usage"), dict):
            return holder["usage"]
    if isinstance(payload.get("usageMetadata"), dict):
        return payload["usageMetadata"]
    return None


def response_of(payload: Any) -> dict[str, Any] | None:
    """`{"id", "output"}` of a Responses API response (or its `response.completed` event)."""
    if isinstance(payload, dict) and isinstance(payload.get("response"), dict):
        payload = payload["response"]
    if not isinstance(payload, dict) or payload.get("object") != "response":
        return None
    if not isinstance(payload.get("id"), str) or not isinstance(payload.get("output"), list):
        return None
    return {"id": payload["id"], "output": payload["output"]}


def output_length(usage: dict[str, Any] | None) -> int | None:
    """Generated tokens: `completion_tokens` (OpenAI), `output_tokens` (Anthropic, Responses),
    `candidatesTokenCount` (Gemini) or `outputTokens` (Bedrock)."""
    if not usage:
        return None
    for key in ("completion_tokens", "output_tokens", "candidatesTokenCount", "outputTokens"):
        if isinstance(usage.get(key), int) and not isinstance(usage.get(key), bool):
            return usage[key]
    return None


def _merge(total: dict[str, Any] | None, update: dict[str, Any]) -> dict[str, Any]:
    merged = dict(total or {})
    merged.update({key: value for key, value in update.items() if value is not None})
    return merged


class _Inflater:
    """Undoes a Content-Encoding chunk by chunk (gzip, deflate); anything else is unreadable."""

    def __init__(self, encoding: str):
        encoding = encoding.strip().lower()
        self.readable = encoding in ("", "identity", "gzip", "x-gzip", "deflate")
        self._zlib = None
        if encoding in ("gzip", "x-gzip"):
            self._zlib = zlib.decompressobj(zlib.MAX_WBITS | 16)
        elif encoding == "deflate":
            self._zlib = zlib.decompressobj()

    def feed(self, chunk: bytes) -> bytes:
        return self._zlib.decompress(chunk) if self._zlib is not None else chunk


class UsageScanner:
    """Watches the raw bytes of one response go by and keeps what `usage` it finds."""

    def __init__(self, content_type: str, content_encoding: str = ""):
        self.streaming = content_type.split(";")[0].strip().lower() == "text/event-stream"
        self.usage: dict[str, Any] | None = None
        self.response: dict[str, Any] | None = None
        self._inflater = _Inflater(content_encoding)
        self._active = self._inflater.readable and (self.streaming or "json" in content_type)
        self._pending = b""
        self._parts: list[bytes] = []
        self._size = 0

    def feed(self, chunk: bytes) -> None:
        if not self._active or not chunk:
            return
        try:
            data = self._inflater.feed(chunk)
        except zlib.error:
            self._active = False
            return
        if self.streaming:
            self._scan_lines(data)
            return
        self._size += len(data)
        if self._size > MAX_JSON_BYTES:
            self._active, self._parts = False, []
        else:
            self._parts.append(data)

    def finish(self) -> dict[str, Any] | None:
        """The usage seen, once the response has ended (or been closed early)."""
        if self._active and self.streaming and self._pending:
            self._scan_line(self._pending)
        elif self._active and self._parts:
            try:
                payload = orjson.loads(b"".join(self._parts))
            except orjson.JSONDecodeError:
                payload = None
            self.usage, self.response = usage_of(payload), response_of(payload)
        self._active, self._parts, self._pending = False, [], b""
        return self.usage

    def _scan_lines(self, data: bytes) -> None:
        lines = (self._pending + data).split(b"\n")
        self._pending = lines.pop()
        for line in lines:
            self._scan_line(line)

    def _scan_line(self, line: bytes) -> None:
        if not line.startswith(b"data:") or not (b'"usage' in line or b"usageMetadata" in line):
            return
        try:
            payload = orjson.loads(line[5:])
        except orjson.JSONDecodeError:
            return
        found = usage_of(payload)
        if found is not None:
            self.usage = _merge(self.usage, found)
        self.response = response_of(payload) or self.response


def scanned(content: bytes, content_type: str) -> UsageScanner:
    """The finished scanner of a response whose content is already in memory."""
    scanner = UsageScanner(content_type)
    scanner.feed(content)
    scanner.finish()
    return scanner
