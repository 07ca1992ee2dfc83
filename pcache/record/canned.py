"""Canned provider responses, served in order by an httpx mock transport (tests, no network).

`CannedResponses` is a handler for `httpx.MockTransport` (or `httpx2.MockTransport`): each
request takes the next response, given as a JSON value, raw bytes (sent as an SSE stream when
they start with `event:` or `data:`), a ready response, or a function of the request.
`chat_completion`, `anthropic_message`, `openai_response` (Responses API) and
`gemini_response` (generateContent) build the JSON the SDKs parse.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Iterable
from typing import Any

import orjson

from pcache.record.transport import http_module

Canned = dict[str, Any] | bytes | Callable[[Any], Any] | Any


class NoCannedResponse(RuntimeError):
    """A request arrived after every canned response was used."""


class CannedResponses:
    """Answers each request with the next canned response; raises when none is left."""

    def __init__(self, responses: Iterable[Canned] = ()):
        self._queue: deque[Canned] = deque(responses)
        self._lock = threading.Lock()

    def add(self, *responses: Canned) -> None:
        with self._lock:
            self._queue.extend(responses)

    @property
    def remaining(self) -> int:
        return len(self._queue)

    def __call__(self, request: Any) -> Any:
        with self._lock:
            if not self._queue:
                raise NoCannedResponse(
                    f"no canned response left for {request.method} {request.url.path}"
                )
            item = self._queue.popleft()
        http = http_module(request)
        if callable(item):
            item = item(request)
        if isinstance(item, http.Response):
            return item
        if isinstance(item, bytes):
            streaming = item.lstrip().startswith((b"event:", b"data:"))
            kind = "text/event-stream" if streaming else "application/json"
            return http.Response(200, headers={"content-type": kind}, content=item)
        return http.Response(
            200, headers={"content-type": "application/json"}, content=orjson.dumps(item)
        )


def tool_call(call_id: str, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """One OpenAI tool call (arguments serialized as the API sends them)."""
    return {
        "id": call_id,
        "type": "function",
        "function": {"name": name, "arguments": orjson.dumps(arguments).decode()},
    }


def chat_completion(
    content: str | None = None,
    *,
    tool_calls: list[dict[str, Any]] | None = None,
    usage: dict[str, Any] | None = None,
    model: str = "gpt-4o-mini",
) -> dict[str, Any]:
    """An OpenAI Chat Completions response with one choice."""
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if tool_calls:
        message["tool_calls"] = tool_calls
    return {
        "id": "chatcmpl-canned",
        "object": "chat.completion",
        "created": 0,
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": message,
                "finish_reason": "tool_calls" if tool_calls else "stop",
            }
        ],
        "usage": usage or {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0},
    }


def anthropic_message(
    text: str | None = None,
    *,
    tool_uses: list[tuple[str, str, dict[str, Any]]] | None = None,
    usage: dict[str, Any] | None = None,
    model: str = "claude-sonnet-4-6",
) -> dict[str, Any]:
    """An Anthropic Messages response: optional text, then (id, name, input) tool uses."""
    content: list[dict[str, Any]] = [{"type": "text", "text": text}] if text else []
    for call_id, name, arguments in tool_uses or []:
        content.append({"type": "tool_use", "id": call_id, "name": name, "input": arguments})
    return {
        "id": "msg_canned",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": "tool_use" if tool_uses else "end_turn",
        "stop_sequence": None,
        "usage": usage or {"input_tokens": 0, "output_tokens": 0},
    }


def openai_response(
    text: str | None = None,
    *,
    function_calls: list[tuple[str, str, dict[str, Any]]] | None = None,
    usage: dict[str, Any] | None = None,
    response_id: str = "resp_canned",
    model: str = "gpt-5",
) -> dict[str, Any]:
    """An OpenAI Responses API response: optional text, then (call_id, name, arguments) calls."""
    output: list[dict[str, Any]] = []
    if text is not None:
        output.append(
            {
                "type": "message",
                "id": f"msg_{response_id}",
                "status": "completed",
                "role": "assistant",
                "content": [{"type": "output_text", "text": text, "annotations": []}],
            }
        )
    for call_id, name, arguments in function_calls or []:
        output.append(
            {
                "type": "function_call",
                "id": f"fc_{call_id}",
                "call_id": call_id,
                "name": name,
                "arguments": orjson.dumps(arguments).decode(),
                "status": "completed",
            }
        )
    return {
        "id": response_id,
        "object": "response",
        "created_at": 0,
        "status": "completed",
        "model": model,
        "output": output,
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
        "usage": usage
        or {
            "input_tokens": 0,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": 0,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": 0,
        },
    }


def gemini_response(
    text: str | None = None,
    *,
    function_calls: list[tuple[str, dict[str, Any]]] | None = None,
    usage: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A Gemini generateContent response: optional text, then (name, args) function calls."""
    parts: list[dict[str, Any]] = [{"text": text}] if text is not None else []
    parts += [{"functionCall": {"name": name, "args": args}} for name, args in function_calls or []]
    return {
        "candidates": [{"content": {"role": "model", "parts": parts}, "finishReason": "STOP"}],
        "usageMetadata": usage or {"promptTokenCount": 0, "candidatesTokenCount": 0},
    }


class CannedTransport:
    """A transport (sync and async, httpx or httpx2) that answers from `CannedResponses`."""

    def __init__(self, responses: CannedResponses):
        self.responses = responses

    def handle_request(self, request: Any) -> Any:
        request.read()
        return self.responses(request)

    async def handle_async_request(self, request: Any) -> Any:
        await request.aread()
        return self.responses(request)

    def close(self) -> None:
        pass

    async def aclose(self) -> None:
        pass
