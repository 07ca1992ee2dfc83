"""One streamed request to a live server, timed: TTFT two ways, inter-token gaps, usage.

TTFT is the time from sending the request to the first chunk whose delta carries content,
reasoning or a tool call (SGLang's, AIPerf's and guidellm's definition); the first chunk of
any kind is recorded too (`vllm bench serve`'s: a role-only chunk counts there). A request
is retried only when it never reached the server (the connection failed), and the clock of
a retried request starts at the attempt that got through.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import orjson

from pcache.replayer.reported_cache import ReportedCache, reported_cache

APIS = ("completions", "chat", "anthropic")
ROUTES = {"completions": "/completions", "chat": "/chat/completions", "anthropic": "/messages"}


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


def _content_of(chunk: dict[str, Any], api: str) -> bool:
    """True when a chunk carries generated content (text, reasoning or a tool call)."""
    if api == "anthropic":
        if chunk.get("type") != "content_block_delta":
            return False
        delta = chunk.get("delta") or {}
        return any(delta.get(key) for key in ("text", "thinking", "partial_json"))
    for choice in chunk.get("choices") or ():
        if not isinstance(choice, dict):
            continue
        if choice.get("text"):
            return True
        delta = choice.get("delta") or {}
        if isinstance(delta, dict) and any(
            delta.get(key) for key in ("content", "reasoning_content", "reasoning", "tool_calls")
        ):
            return True
    return False


def _error_message(status: int, text: str) -> str:
    try:
        body = orjson.loads(text)
    except orjson.JSONDecodeError:
        return f"HTTP {status}: {text.strip()[:200]}"
    error = body.get("error") if isinstance(body, dict) else None
    if isinstance(error, dict) and isinstance(error.get("message"), str):
        return f"HTTP {status}: {error['message'][:200]}"
    return f"HTTP {status}: {text.strip()[:200]}"


class _Usage:
    """The usage of a stream: OpenAI's last chunk, or Anthropic's start and delta events."""

    def __init__(self) -> None:
        self.usage: dict[str, Any] | None = None
        self.body: dict[str, Any] = {}

    def read(self, chunk: dict[str, Any], api: str) -> None:
        if api == "anthropic":
            kind = chunk.get("type")
            usage = None
            if kind == "message_start":
                usage = (chunk.get("message") or {}).get("usage")
            elif kind == "message_delta":
                usage = chunk.get("usage")
            if isinstance(usage, dict):
                self.usage = {
                    **(self.usage or {}),
                    **{k: v for k, v in usage.items() if v is not None},
                }
            return
        if isinstance(chunk.get("usage"), dict):
            self.usage = chunk["usage"]
        if "sglext" in chunk or "meta_info" in chunk:
            self.body = chunk

    def tokens(self, api: str) -> tuple[int | None, int | None]:
        usage = self.usage or {}
        if api == "anthropic":
            parts = [
                usage.get(k)
                for k in ("input_tokens", "cache_read_input_tokens", "cache_creation_input_tokens")
            ]
            known = [p for p in parts if type(p) is int]
            prompt = sum(known) if known else None
            output = usage.get("output_tokens")
        else:
            prompt, output = usage.get("prompt_tokens"), usage.get("completion_tokens")
        return (
            prompt if type(prompt) is int else None,
            output if type(output) is int else None,
        )


async def send_request(
    client: Any,
    url: str,
    body: dict[str, Any],
    api: str,
    timing: RequestTiming,
    run_start: float,
    retries: int,
    secret: str | None = None,
) -> RequestTiming:
    """Stream one request into `timing` (filled in place, also returned); never raises for a
    failed request: `timing.ok` is False and `timing.error` says why."""
    import httpx

    for attempt in range(retries + 1):
        sent = time.perf_counter()
        timing.start_s = sent - run_start
        timing.retries = attempt
        timing.error = ""  # an attempt that never reached the server leaves nothing behind
        try:
            await _stream(client, url, body, api, timing, sent)
            timing.error = _scrub(timing.error, secret)  # a server may echo the key back
            return timing
        except (httpx.ConnectError, httpx.ConnectTimeout) as error:  # never reached the server
            timing.error = _scrub(f"{type(error).__name__}: {error}", secret)
            if attempt == retries:
                return timing
        except httpx.HTTPError as error:
            timing.error = (
                _scrub(f"{type(error).__name__}: {error}", secret) or type(error).__name__
            )
            return timing
    return timing


def _scrub(message: str, secret: str | None) -> str:
    return message.replace(secret, "***") if secret else message


async def _stream(
    client: Any, url: str, body: dict[str, Any], api: str, timing: RequestTiming, sent: float
) -> None:
    usage = _Usage()
    last_content: float | None = None
    async with client.stream("POST", url, content=orjson.dumps(body)) as response:
        timing.status = response.status_code
        if response.status_code != 200:
            timing.error = _error_message(
                response.status_code, (await response.aread()).decode("utf-8", "replace")
            )
            return
        done = False
        async for line in response.aiter_lines():
            if not line.startswith("data:"):
                continue  # blank separators, `event:` names, `:` keep-alive comments
            data = line[5:].strip()
            if data == "[DONE]":
                done = True
                break
            now = time.perf_counter()
            try:
                chunk = orjson.loads(data)
            except orjson.JSONDecodeError:
                timing.error = f"a stream chunk is not JSON: {data[:80]!r}"
                return
            if not isinstance(chunk, dict):
                continue
            if timing.first_chunk_s is None:
                timing.first_chunk_s = now - sent
            if "error" in chunk or chunk.get("type") == "error":
                error = chunk.get("error")
                message = error.get("message") if isinstance(error, dict) else error
                timing.error = f"error in the stream: {str(message)[:200]}"
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
    timing.prompt_tokens, timing.completion_tokens = usage.tokens(api)
    timing.cache = reported_cache(usage.body, usage.usage)
    timing.ok = True
