"""OpenAI response bodies: whole answers, stream chunks and the usage block."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import orjson

from pcache.serve.engine_loop import Usage


def usage_body(usage: Usage) -> dict[str, Any]:
    return {
        "prompt_tokens": usage.prompt_tokens,
        "completion_tokens": usage.completion_tokens,
        "total_tokens": usage.prompt_tokens + usage.completion_tokens,
        "prompt_tokens_details": {"cached_tokens": usage.cached_tokens},
    }


def sse(payload: dict[str, Any] | str) -> bytes:
    data = payload.encode() if isinstance(payload, str) else orjson.dumps(payload)
    return b"data: " + data + b"\n\n"


@dataclass(slots=True)
class ResponseBuilder:
    """Bodies of one request's answer, chat or text completion."""

    chat: bool
    model: str
    request_id: str
    include_usage: bool = False
    created: int = field(default_factory=lambda: int(time.time()))
    _role_sent: bool = False

    def _envelope(self, chunk: bool) -> dict[str, Any]:
        if self.chat:
            kind = "chat.completion.chunk" if chunk else "chat.completion"
        else:
            kind = "text_completion"
        return {"id": self.request_id, "object": kind, "created": self.created, "model": self.model}

    def chunk(
        self,
        text: str,
        finish_reason: str | None,
        logprobs: dict[str, Any] | None = None,
        stop_reason: str | int | None = None,
    ) -> bytes:
        if self.chat:
            delta: dict[str, Any] = {"content": text}
            if not self._role_sent:
                delta = {"role": "assistant", **delta}
                self._role_sent = True
            choice = {"index": 0, "delta": delta, "logprobs": logprobs}
        else:
            choice = {"index": 0, "text": text, "logprobs": logprobs}
        choice["finish_reason"] = finish_reason
        if finish_reason is not None:
            choice["stop_reason"] = stop_reason
        body = {**self._envelope(chunk=True), "choices": [choice]}
        if self.include_usage:
            body["usage"] = None
        return sse(body)

    def usage_chunk(self, usage: Usage) -> bytes:
        return sse({**self._envelope(chunk=True), "choices": [], "usage": usage_body(usage)})

    def whole(
        self,
        text: str,
        finish_reason: str,
        usage: Usage,
        logprobs: dict[str, Any] | None = None,
        stop_reason: str | int | None = None,
    ) -> dict[str, Any]:
        if self.chat:
            message = {"role": "assistant", "content": text}
            choice = {"index": 0, "message": message, "logprobs": logprobs}
        else:
            choice = {"index": 0, "text": text, "logprobs": logprobs}
        choice["finish_reason"] = finish_reason
        choice["stop_reason"] = stop_reason
        return {**self._envelope(chunk=False), "choices": [choice], "usage": usage_body(usage)}
