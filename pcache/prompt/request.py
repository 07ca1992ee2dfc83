"""Request shapes pcache reads, normalized into one chat-shaped record with JSON-path provenance.

Accepted shapes (auto-detected): OpenAI Chat Completions bodies, OpenAI Batch API lines
(`custom_id`, `method`, `url`, `body`), Anthropic Messages bodies, `{"prompt": "..."}` and
`{"token_ids": [...]}`. Messages are normalized to the OpenAI shape that chat templates expect;
`origins` maps each normalized path back to the path in the user's JSON.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import orjson

from pcache.errors import InputError

KIND_OPENAI = "openai"
KIND_ANTHROPIC = "anthropic"
KIND_PROMPT = "prompt"
KIND_TOKEN_IDS = "token_ids"

SIDECAR_KEYS = ("timestamp", "session_id", "output_length", "usage")
_ANTHROPIC_BLOCK_TYPES = {"tool_use", "tool_result", "thinking", "redacted_thinking", "document"}


@dataclass(slots=True)
class Request:
    """One request, normalized. `raw` is the body exactly as parsed (key order kept)."""

    source: str
    line: int | None
    kind: str
    raw: dict[str, Any]
    path_prefix: str = ""
    model: str | None = None
    messages: list[dict[str, Any]] = field(default_factory=list)
    tools: list[dict[str, Any]] = field(default_factory=list)
    prompt: str | None = None
    token_ids: list[int] | None = None
    cache_salt: str | None = None
    session_id: str | None = None
    timestamp: float | None = None
    output_length: int | None = None
    usage: dict[str, Any] | None = None
    breakpoints: list[str] = field(default_factory=list)
    origins: dict[str, str] = field(default_factory=dict)

    @property
    def label(self) -> str:
        return self.source if self.line is None else f"{self.source}:{self.line}"

    def source_path(self, normalized: str) -> str:
        """Map a normalized path (e.g. `messages[2].content`) to the path in the user's JSON."""
        best = normalized if normalized in self.origins else ""
        if not best:  # the longest key that is `normalized` cut before a "." or a "["
            for cut in range(len(normalized) - 1, 0, -1):
                if normalized[cut] in ".[" and normalized[:cut] in self.origins:
                    best = normalized[:cut]
                    break
        mapped = self.origins[best] + normalized[len(best) :] if best else normalized
        if self.path_prefix:
            return f"{self.path_prefix}.{mapped}" if mapped else self.path_prefix
        return mapped


def tool_name(tool: Any) -> str:
    """The name of an OpenAI (`function.name`) or Anthropic (`name`) tool; "" when none."""
    if not isinstance(tool, dict):
        return ""
    function = tool.get("function")
    if isinstance(function, dict) and isinstance(function.get("name"), str):
        return function["name"]
    return str(tool.get("name", ""))


def tool_names(request: Request) -> list[str]:
    return [tool_name(tool) for tool in request.tools]


def request_from_document(value: Any, source: str, line: int | None = None) -> Request:
    """Detect the shape of a parsed JSON value and normalize it."""
    if not isinstance(value, dict):
        raise InputError(source, f"expected a JSON object, got {type(value).__name__}", line)
    body, prefix = value, ""
    if isinstance(value.get("body"), dict) and ("custom_id" in value or "url" in value):
        body, prefix = value["body"], "body"
    elif isinstance(value.get("request"), dict) and "messages" not in value:
        body, prefix = value["request"], "request"
    request = Request(source=source, line=line, kind="", raw=body, path_prefix=prefix)
    _read_sidecar(request, value, body)
    if "token_ids" in body:
        _load_token_ids(request, body)
    elif "prompt" in body and "messages" not in body:
        if not isinstance(body["prompt"], str):
            raise InputError(source, "`prompt` must be a string", line)
        request.kind, request.prompt = KIND_PROMPT, body["prompt"]
    elif isinstance(body.get("messages"), list):
        if _looks_anthropic(body):
            _load_anthropic(request, body)
        else:
            _load_openai(request, body)
    else:
        keys = ", ".join(list(body)[:6]) or "none"
        raise InputError(
            source,
            "unknown request shape (expected `messages`, `prompt` or `token_ids`;"
            f" found keys: {keys})",
            line,
        )
    request.model = body.get("model") if isinstance(body.get("model"), str) else None
    salt = body.get("cache_salt")
    request.cache_salt = salt if isinstance(salt, str) and salt else None
    return request


def _read_sidecar(request: Request, outer: dict[str, Any], body: dict[str, Any]) -> None:
    for holder in (body, outer):
        for key in SIDECAR_KEYS:
            if key in holder and getattr(request, key) is None:
                value = holder[key]
                if key == "timestamp":
                    request.timestamp = parse_timestamp(value)
                elif key == "session_id" and value is not None:
                    request.session_id = str(value)
                elif key == "output_length" and isinstance(value, int):
                    request.output_length = value
                elif key == "usage" and isinstance(value, dict):
                    request.usage = value
    metadata = body.get("metadata")
    if request.session_id is None and isinstance(metadata, dict):
        for key in ("session_id", "conversation_id", "thread_id"):
            if metadata.get(key) is not None:
                request.session_id = str(metadata[key])
                break


_ISO = re.compile(r"^\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}")


def parse_timestamp(value: Any) -> float | None:
    """Timestamps in milliseconds (numbers) or ISO 8601 strings, returned as milliseconds."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str) and _ISO.match(value):
        from datetime import datetime, timezone

        text = value.replace("Z", "+00:00")
        try:
            moment = datetime.fromisoformat(text)
        except ValueError:
            return None
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=timezone.utc)
        return moment.timestamp() * 1000.0
    return None


def _load_token_ids(request: Request, body: dict[str, Any]) -> None:
    ids = body["token_ids"]
    if not isinstance(ids, list) or not all(
        isinstance(t, int) and not isinstance(t, bool) and t >= 0 for t in ids
    ):
        raise InputError(
            request.source, "`token_ids` must be a list of non-negative integers", request.line
        )
    request.kind, request.token_ids = KIND_TOKEN_IDS, ids


def _looks_anthropic(body: dict[str, Any]) -> bool:
    if "system" in body or "anthropic_version" in body:
        return True
    tools = body.get("tools")
    if isinstance(tools, list) and any(isinstance(t, dict) and "input_schema" in t for t in tools):
        return True
    for message in body["messages"]:
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(content, list):
            for block in content:
                if isinstance(block, dict) and (
                    block.get("type") in _ANTHROPIC_BLOCK_TYPES or "cache_control" in block
                ):
                    return True
    return False


def _text_of_parts(parts: list[Any]) -> tuple[str, int | None]:
    """Join text parts with newlines (as vLLM does); also return the index of a single part."""
    texts = [
        (index, part["text"])
        for index, part in enumerate(parts)
        if isinstance(part, dict) and isinstance(part.get("text"), str)
    ]
    if len(texts) == 1:
        return texts[0][1], texts[0][0]
    return "\n".join(text for _, text in texts), None


def parse_arguments(arguments: Any) -> Any:
    """Tool-call arguments given as a JSON string are parsed, as serving engines do."""
    if isinstance(arguments, str):
        try:
            return orjson.loads(arguments)
        except orjson.JSONDecodeError:
            return arguments
    return arguments


def _load_openai(request: Request, body: dict[str, Any]) -> None:
    request.kind = KIND_OPENAI
    for index, message in enumerate(body["messages"]):
        if not isinstance(message, dict) or not isinstance(message.get("role"), str):
            raise InputError(
                request.source, f"messages[{index}] must be an object with a `role`", request.line
            )
        normalized: dict[str, Any] = {"role": message["role"]}
        request.origins[f"messages[{len(request.messages)}]"] = f"messages[{index}]"
        content = message.get("content")
        if isinstance(content, list):
            text, single = _text_of_parts(content)
            normalized["content"] = text
            if single is not None:
                request.origins[f"messages[{len(request.messages)}].content"] = (
                    f"messages[{index}].content[{single}].text"
                )
        elif content is not None:
            normalized["content"] = content if isinstance(content, str) else str(content)
        for key in ("name", "tool_call_id", "reasoning_content", "reasoning", "thinking"):
            if message.get(key) is not None:
                normalized[key] = message[key]
        if isinstance(message.get("tool_calls"), list):
            calls = []
            for call in message["tool_calls"]:
                if not isinstance(call, dict):
                    continue
                function = dict(call.get("function") or {})
                if "arguments" in function:
                    function["arguments"] = parse_arguments(function["arguments"])
                calls.append({**call, "function": function})
            normalized["tool_calls"] = calls
        request.messages.append(normalized)
    tools = body.get("tools")
    if tools is not None and not isinstance(tools, list):
        raise InputError(request.source, "`tools` must be a list", request.line)
    for tool in tools or []:
        if isinstance(tool, dict):
            request.tools.append(tool)


def _load_anthropic(request: Request, body: dict[str, Any]) -> None:
    request.kind = KIND_ANTHROPIC
    system = body.get("system")
    if isinstance(system, str):
        request.messages.append({"role": "system", "content": system})
        request.origins["messages[0].content"] = "system"
    elif isinstance(system, list):
        text, single = _text_of_parts(system)
        request.messages.append({"role": "system", "content": text})
        request.origins["messages[0].content"] = (
            f"system[{single}].text" if single is not None else "system"
        )
        for index, block in enumerate(system):
            if isinstance(block, dict) and "cache_control" in block:
                request.breakpoints.append(f"system[{index}]")
    for index, message in enumerate(body["messages"]):
        if not isinstance(message, dict) or not isinstance(message.get("role"), str):
            raise InputError(
                request.source, f"messages[{index}] must be an object with a `role`", request.line
            )
        _append_anthropic_message(request, index, message)
    for index, tool in enumerate(body.get("tools") or []):
        if not isinstance(tool, dict):
            continue
        if "cache_control" in tool:
            request.breakpoints.append(f"tools[{index}]")
        if "input_schema" not in tool:  # server tools (web search...) carry no schema
            request.tools.append({"type": tool.get("type", "function"), "name": tool.get("name")})
            continue
        function = {"name": tool.get("name"), "description": tool.get("description", "")}
        function["parameters"] = tool["input_schema"]
        request.origins[f"tools[{len(request.tools)}].function.parameters"] = (
            f"tools[{index}].input_schema"
        )
        request.origins[f"tools[{len(request.tools)}].function"] = f"tools[{index}]"
        request.tools.append({"type": "function", "function": function})


def _append_anthropic_message(request: Request, index: int, message: dict[str, Any]) -> None:
    role, content = message["role"], message.get("content")
    if isinstance(content, str):
        request.origins[f"messages[{len(request.messages)}]"] = f"messages[{index}]"
        request.messages.append({"role": role, "content": content})
        return
    if not isinstance(content, list):
        request.origins[f"messages[{len(request.messages)}]"] = f"messages[{index}]"
        request.messages.append({"role": role, "content": ""})
        return
    texts: list[str] = []
    normalized: dict[str, Any] = {"role": role}
    calls: list[dict[str, Any]] = []
    first_text_block = None
    for block_index, block in enumerate(content):
        if not isinstance(block, dict):
            continue
        if "cache_control" in block:
            request.breakpoints.append(f"messages[{index}].content[{block_index}]")
        kind = block.get("type")
        if kind == "text" and isinstance(block.get("text"), str):
            first_text_block = block_index if first_text_block is None else first_text_block
            texts.append(block["text"])
        elif kind == "thinking" and isinstance(block.get("thinking"), str):
            normalized["reasoning_content"] = block["thinking"]
        elif kind == "tool_use":
            calls.append(
                {
                    "id": block.get("id"),
                    "type": "function",
                    "function": {"name": block.get("name"), "arguments": block.get("input", {})},
                }
            )
        elif kind == "tool_result":
            result = block.get("content")
            if isinstance(result, list):
                result, _ = _text_of_parts(result)
            position = len(request.messages)
            request.origins[f"messages[{position}]"] = f"messages[{index}].content[{block_index}]"
            request.messages.append(
                {"role": "tool", "tool_call_id": block.get("tool_use_id"), "content": result or ""}
            )
    if texts or calls or role != "user":
        position = len(request.messages)
        request.origins[f"messages[{position}]"] = f"messages[{index}]"
        if len(texts) == 1 and first_text_block is not None:
            request.origins[f"messages[{position}].content"] = (
                f"messages[{index}].content[{first_text_block}].text"
            )
        normalized["content"] = "\n".join(texts)
        if calls:
            normalized["tool_calls"] = calls
        request.messages.append(normalized)
