"""One streamed request to a live server, timed: TTFT two ways, inter-token gaps, usage.

TTFT is the time from sending the request to the first chunk whose delta carries content,
reasoning or a tool call (SGLang's, AIPerf's and guidellm's definition); the first chunk of
any kind is recorded too (`vllm bench serve`'s: a role-only chunk counts there). A request
is retried only when it never reached the server (the connection failed), and the clock of
a retried request starts at the attempt that got through.

A hostile or broken server fails the one request, with its reason, never the replay: the
whole request (retries, the stream, keep-alive comments) has a deadline; what is read is
bounded (`pcache.replayer.endpoint.reading`); a chunk of an unexpected shape fails the
request that got it; impossible usage is unknown (`pcache.replayer.endpoint.usage`).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson

from pcache.prompt.shapes.fields import json_kind
from pcache.replayer.endpoint.reading import (
    MAX_ERROR_BYTES,
    ResponseTooLarge,
    UnsupportedEncoding,
    iter_lines,
    read_body,
)
from pcache.replayer.endpoint.reported_cache import ReportedCache
from pcache.replayer.endpoint.url import scrub
from pcache.replayer.endpoint.usage import checked_usage

APIS = ("completions", "chat", "anthropic")
ROUTES = {"completions": "/completions", "chat": "/chat/completions", "anthropic": "/messages"}
CONTENT_KEYS = ("content", "reasoning_content", "reasoning", "tool_calls")
ANTHROPIC_CONTENT_KEYS = ("text", "thinking", "partial_json")


@dataclass(slots=True)
class RequestTiming:
    """What one request measured; times are seconds, `start_s` from the start of the run."""

    index: int
    start_s: float = 0.0
    ok: bool = False
    status: int | None = None
    error: str = ""
    ttft_s: float | None = None
    first_chunk_s: float | None = None
    latency_s: float | None = None
    itl_s: list[float] = field(default_factory=list)
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    content_chunks: int = 0
    cache: ReportedCache = field(default_factory=lambda: ReportedCache(None))
    retries: int = 0
    usage_problem: str | None = None
    """Why a usage count the server sent was taken as unknown (`endpoint_usage`)."""


class ShapeError(Exception):
    """A stream chunk of a shape no server sends; the message says what was found."""


def _content_of(chunk: dict[str, Any], api: str) -> bool:
    """True when a chunk carries generated content (text, reasoning or a tool call)."""
    if api == "anthropic":
        if chunk.get("type") != "content_block_delta":
            return False
        delta = chunk.get("delta")
        if not isinstance(delta, dict):
            raise ShapeError(f"a content_block_delta's `delta` is {json_kind(delta)}")
        return any(delta.get(key) for key in ANTHROPIC_CONTENT_KEYS)
    choices = chunk.get("choices")
    if choices is None:
        return False
    if not isinstance(choices, list):
        raise ShapeError(f"a chunk's `choices` is {json_kind(choices)}, not a list")
    found = False
    for choice in choices:
        if not isinstance(choice, dict):
            raise ShapeError(f"a chunk's choice is {json_kind(choice)}, not an object")
        if choice.get("text"):
            found = True
        delta = choice.get("delta")
        if delta is None:
            continue
        if not isinstance(delta, dict):
            raise ShapeError(f"a chunk's `delta` is {json_kind(delta)}, not an object")
        found = found or any(delta.get(key) for key in CONTENT_KEYS)
    return found


def _error_message(status: int, data: bytes) -> str:
    text = data.decode("utf-8", "replace")
    try:
        body = orjson.loads(data)
    except orjson.JSONDecodeError:
        return f"HTTP {status}: {text.strip()[:200]}"
    error = body.get("error") if isinstance(body, dict) else None
    if isinstance(error, dict) and isinstance(error.get("message"), str):
        return f"HTTP {status}: {error['message'][:200]}"
    return f"HTTP {status}: {text.strip()[:200]}"


class _Usage:
    """The usage of a stream: OpenAI's last chunk, or Anthropic's start and delta events."""

    def __init__(self) -> None:
        self.usage: Any = None
        self.body: dict[str, Any] = {}

    def read(self, chunk: dict[str, Any], api: str) -> None:
        if api == "anthropic":
            kind = chunk.get("type")
            usage = None
            if kind == "message_start":
                message = chunk.get("message")
                usage = message.get("usage") if isinstance(message, dict) else None
            elif kind == "message_delta":
                usage = chunk.get("usage")
            if isinstance(usage, dict):
                known = self.usage if isinstance(self.usage, dict) else {}
                self.usage = {**known, **{k: v for k, v in usage.items() if v is not None}}
            elif usage is not None:
                self.usage = usage  # not an object: `checked_usage` says so
            return
        if chunk.get("usage") is not None:
            self.usage = chunk["usage"]
        if "sglext" in chunk or "meta_info" in chunk:
            self.body = chunk


def _failed(message: str, secrets: Sequence[str]) -> str:
    return scrub(message, secrets) or "failed"


async def send_request(
    client: Any,
    url: str,
    body: dict[str, Any],
    api: str,
    timing: RequestTiming,
    run_start: float,
    retries: int,
    secrets: Sequence[str] = (),
    deadline_s: float | None = None,
    prompt_tokens: int | None = None,
) -> RequestTiming:
    """Stream one request into `timing` (filled in place, also returned); never raises for a
    failed request: `timing.ok` is False and `timing.error` says why. `deadline_s` bounds
    the whole request (every attempt, the whole stream); `prompt_tokens` is pcache's count
    of the prompt, which the server's usage is checked against; `secrets` are never quoted."""
    import httpx

    async def attempts() -> None:
        for attempt in range(retries + 1):
            sent = time.perf_counter()
            timing.start_s = sent - run_start
            timing.retries = attempt
            timing.error = ""  # an attempt that never reached the server leaves nothing
            try:
                await _stream(client, url, body, api, timing, sent, prompt_tokens)
                return
            except (httpx.ConnectError, httpx.ConnectTimeout) as error:  # never reached it
                timing.error = f"{type(error).__name__}: {error}"
                if attempt == retries:
                    return

    try:
        await asyncio.wait_for(attempts(), deadline_s)
    except asyncio.TimeoutError:
        timing.error = f"no complete response within --request-timeout {deadline_s:g} s"
    except httpx.HTTPError as error:
        name = type(error).__name__
        timing.error = f"{name}: {error}" if str(error) else name
    except (ResponseTooLarge, UnsupportedEncoding, ShapeError) as error:
        timing.error = str(error)
    except (TypeError, ValueError, KeyError, AttributeError, UnicodeError) as error:
        timing.error = f"the response could not be read ({type(error).__name__}: {error})"
    if timing.error:
        timing.ok = False
        timing.error = _failed(timing.error, secrets)  # a server may echo the key back
    return timing


async def _stream(
    client: Any,
    url: str,
    body: dict[str, Any],
    api: str,
    timing: RequestTiming,
    sent: float,
    prompt_tokens: int | None,
) -> None:
    usage = _Usage()
    last_content: float | None = None
    async with client.stream("POST", url, content=orjson.dumps(body)) as response:
        timing.status = response.status_code
        if response.status_code != 200:
            data = await read_body(response, MAX_ERROR_BYTES, truncate=True)
            timing.error = _error_message(response.status_code, data)
            return
        done = False
        async for line in iter_lines(response):
            if not line.startswith(b"data:"):
                continue  # blank separators, `event:` names, `:` keep-alive comments
            data = line[5:].strip()
            if data == b"[DONE]":
                done = True
                break
            now = time.perf_counter()
            try:
                chunk = orjson.loads(data)
            except orjson.JSONDecodeError:
                timing.error = (
                    f"a stream chunk is not JSON: {data[:80].decode('utf-8', 'replace')!r}"
                )
                return
            if not isinstance(chunk, dict):
                continue
            if timing.first_chunk_s is None:
                timing.first_chunk_s = now - sent
            if chunk.get("error") is not None or chunk.get("type") == "error":
                error = chunk.get("error")
                message = error.get("message") if isinstance(error, dict) else error
                if not isinstance(message, str):
                    message = orjson.dumps(error).decode()
                timing.error = f"error in the stream: {message[:200]}"
                return
            if _content_of(chunk, api):
                timing.content_chunks += 1
                if last_content is None:
                    timing.ttft_s = now - sent
                else:
                    timing.itl_s.append(now - last_content)
                last_content = now
            usage.read(chunk, api)
            if api == "anthropic" and chunk.get("type") == "message_stop":
                done = True
                break
        timing.latency_s = time.perf_counter() - sent
        if not done:
            timing.error = "the stream ended without its final event"
            return
    checked = checked_usage(usage.usage, usage.body, api, prompt_tokens)
    timing.prompt_tokens, timing.completion_tokens = (
        checked.prompt_tokens,
        checked.completion_tokens,
    )
    timing.cache = checked.cache
    timing.usage_problem = checked.problem
    timing.ok = True
