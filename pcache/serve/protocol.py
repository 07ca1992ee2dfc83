"""The OpenAI request bodies `pcache serve` accepts, checked into one `GenerationRequest`.

Accepted: `/v1/completions` (`prompt`: a string or a list of token ids) and
`/v1/chat/completions` (`messages`, optional `tools`), with `max_tokens` (or
`max_completion_tokens`), `temperature`, `stream`, `stream_options.include_usage`, `n` = 1,
and vLLM's `ignore_eos` and `cache_salt`. Anything else malformed is an `ApiError` (400).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

DEFAULT_MAX_TOKENS = 16


class ApiError(Exception):
    """An OpenAI-style error answer: HTTP status, message, type and the offending parameter."""

    def __init__(
        self,
        status: int,
        message: str,
        error_type: str = "invalid_request_error",
        param: str | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.error_type = error_type
        self.param = param

    def body(self) -> dict[str, Any]:
        return {
            "error": {
                "message": self.message,
                "type": self.error_type,
                "param": self.param,
                "code": self.status,
            }
        }


def bad_request(message: str, param: str | None = None) -> ApiError:
    return ApiError(400, message, param=param)


@dataclass(frozen=True, slots=True)
class GenerationRequest:
    """A checked request body: what to generate and how to answer."""

    chat: bool
    model: str | None
    prompt: str | list[int] | None
    messages: list[dict[str, Any]] | None
    tools: list[Any] | None
    max_tokens: int
    temperature: float
    stream: bool
    include_usage: bool
    ignore_eos: bool
    cache_salt: str | None


def _optional(body: dict, key: str, kind: type | tuple[type, ...], what: str) -> Any:
    value = body.get(key)
    if value is None:
        return None
    if isinstance(value, bool) and bool not in (kind if isinstance(kind, tuple) else (kind,)):
        raise bad_request(f"`{key}` must be {what}", key)
    if not isinstance(value, kind):
        raise bad_request(f"`{key}` must be {what}", key)
    return value


def _prompt(body: dict) -> str | list[int]:
    prompt = body.get("prompt")
    if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], (str, list)):
        prompt = prompt[0]  # a batch of one
    if isinstance(prompt, str):
        if not prompt:
            raise bad_request("`prompt` must not be empty", "prompt")
        return prompt
    if isinstance(prompt, list) and prompt and all(type(t) is int and t >= 0 for t in prompt):
        return prompt
    raise bad_request(
        "`prompt` must be a non-empty string or a list of non-negative token ids", "prompt"
    )


def _messages(body: dict) -> list[dict[str, Any]]:
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise bad_request("`messages` must be a non-empty list", "messages")
    for index, message in enumerate(messages):
        if not isinstance(message, dict) or not isinstance(message.get("role"), str):
            raise bad_request(f"`messages[{index}]` must be an object with a `role`", "messages")
    return messages


def parse_request(body: Any, chat: bool) -> GenerationRequest:
    """Check a decoded JSON body; raises ApiError(400) naming the parameter at fault."""
    if not isinstance(body, dict):
        raise bad_request("the request body must be a JSON object")
    n = _optional(body, "n", int, "an integer")
    if n not in (None, 1):
        raise bad_request("only `n` = 1 is supported", "n")
    max_tokens = _optional(body, "max_completion_tokens", int, "a positive integer")
    if max_tokens is None:
        max_tokens = _optional(body, "max_tokens", int, "a positive integer")
    if max_tokens is not None and max_tokens < 1:
        raise bad_request("`max_tokens` must be at least 1", "max_tokens")
    temperature = _optional(body, "temperature", (int, float), "a number in [0, 2]")
    if temperature is not None and not 0 <= temperature <= 2:
        raise bad_request("`temperature` must be in [0, 2]", "temperature")
    stream_options = _optional(body, "stream_options", dict, "an object")
    stream = bool(_optional(body, "stream", bool, "a boolean"))
    if stream_options is not None and not stream:
        raise bad_request("`stream_options` needs `stream` true", "stream_options")
    include_usage = (stream_options or {}).get("include_usage", False)
    if not isinstance(include_usage, bool):
        raise bad_request("`stream_options.include_usage` must be a boolean", "stream_options")
    tools = _optional(body, "tools", list, "a list") if chat else None
    return GenerationRequest(
        chat=chat,
        model=_optional(body, "model", str, "a string"),
        prompt=None if chat else _prompt(body),
        messages=_messages(body) if chat else None,
        tools=tools or None,
        max_tokens=max_tokens or DEFAULT_MAX_TOKENS,
        temperature=1.0 if temperature is None else float(temperature),
        stream=stream,
        include_usage=include_usage,
        ignore_eos=bool(_optional(body, "ignore_eos", bool, "a boolean")),
        cache_salt=_optional(body, "cache_salt", str, "a string"),
    )
