"""Request shapes pcache reads, normalized into one chat-shaped record with JSON-path provenance.

Accepted shapes (auto-detected): OpenAI Chat Completions bodies, OpenAI Batch API lines
(`custom_id`, `method`, `url`, `body`), Anthropic Messages bodies, `{"prompt": "..."}` and
`{"token_ids": [...]}`, and the shapes `pcache.prompt.shapes.detect` reads (OpenAI Responses, Gemini
generateContent, Bedrock Converse, OpenTelemetry GenAI and OpenInference spans). Messages are
normalized to the OpenAI shape that chat templates expect; `origins` maps each normalized path
back to the path in the user's JSON.
"""

from __future__ import annotations

from typing import Any

from pcache.errors import InputError
from pcache.prompt.reading.loading import Document
from pcache.prompt.shapes.detect import reader_for
from pcache.prompt.shapes.fields import Where, json_kind
from pcache.prompt.shapes.reasoning import REASONING_KEYS
from pcache.prompt.shapes.request_record import KIND_ANTHROPIC as KIND_ANTHROPIC
from pcache.prompt.shapes.request_record import KIND_BEDROCK as KIND_BEDROCK
from pcache.prompt.shapes.request_record import KIND_GEMINI as KIND_GEMINI
from pcache.prompt.shapes.request_record import KIND_OPENAI as KIND_OPENAI
from pcache.prompt.shapes.request_record import KIND_PROMPT as KIND_PROMPT
from pcache.prompt.shapes.request_record import KIND_SPAN as KIND_SPAN
from pcache.prompt.shapes.request_record import KIND_TOKEN_IDS as KIND_TOKEN_IDS
from pcache.prompt.shapes.request_record import SIDECAR_KEYS as SIDECAR_KEYS
from pcache.prompt.shapes.request_record import Request as Request
from pcache.prompt.shapes.request_record import (
    cached_tokens_of,
    parse_arguments,
    read_sidecar,
    tool_use_call,
)
from pcache.prompt.shapes.request_record import parse_timestamp as parse_timestamp

_ANTHROPIC_BLOCK_TYPES = {"tool_use", "tool_result", "thinking", "redacted_thinking", "document"}


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


ROLES = ("system", "developer", "user", "assistant", "tool", "function", "ipython")
"""Roles of OpenAI-shaped messages."""
ANTHROPIC_ROLES = ("user", "assistant", "system")
"""Roles of Anthropic messages (`system` is also accepted inline, as some clients send it)."""
_TEXT_KEYS = ("name", "tool_call_id")
_MESSAGE_TEXT_KEYS = _TEXT_KEYS + REASONING_KEYS


def request_of(document: Document) -> Request:
    """`request_from_document` of a loaded document; errors point at line:column."""
    try:
        return request_from_document(document.value, document.source, document.line, document.path)
    except InputError as failure:
        raise document.locate(failure) from None


_BODY_KEYS = ("messages", "input", "contents", "prompt", "token_ids", "attributes")


def _is_wrapper(value: dict[str, Any]) -> bool:
    """A log line holding its request under `body` beside sidecar keys, with no URL."""
    return isinstance(value["body"], dict) and not any(key in value for key in _BODY_KEYS)


def request_from_document(
    value: Any, source: str, line: int | None = None, at: str = ""
) -> Request:
    """Detect the shape of a parsed JSON value, check every field pcache reads, normalize it.

    `at`: the JSON path of `value` inside its line (a span inside an OTLP export), for errors.
    """
    where = Where(source, line, at)
    if not isinstance(value, dict):
        raise where.expect(value, "", "a JSON object (a request)")
    body, prefix = value, at
    if "body" in value and ("custom_id" in value or "url" in value or _is_wrapper(value)):
        body, prefix = where.object(value, "body", "body") or {}, where.path("body")
    elif isinstance(value.get("request"), dict) and "messages" not in value:
        body, prefix = value["request"], where.path("request")
    where.check_nesting(value)
    where = Where(source, line, prefix)
    request = Request(source=source, line=line, kind="", raw=body, path_prefix=prefix)
    reader = reader_for(body)
    if reader is not None:
        reader(request, value, body, where)
        request.cached_tokens = request.cached_tokens or cached_tokens_of(request.usage)
        return request
    read_sidecar(request, value, body, where)
    request.shape = "chat"
    if "token_ids" in body:
        request.kind = KIND_TOKEN_IDS
        request.token_ids = where.token_ids(body["token_ids"], "token_ids")
    elif "prompt" in body and "messages" not in body:
        if not isinstance(body["prompt"], str):
            raise where.expect(body["prompt"], "prompt", "a string")
        request.kind, request.prompt = KIND_PROMPT, body["prompt"]
    elif "messages" in body:
        messages = body["messages"]
        if not isinstance(messages, list):
            raise where.expect(messages, "messages", "a list of messages")
        where.items(messages, "messages", "a message object")
        if _looks_anthropic(body):
            _load_anthropic(request, body, where)
        else:
            _load_openai(request, body, where)
    else:
        keys = ", ".join(list(body)[:6]) or "none"
        raise where.error(
            "",
            "unknown request shape (expected `messages`, `input`, `contents`, `prompt`,"
            f" `token_ids` or a model-call span; found keys: {keys})",
        )
    request.model = where.string(body, "model", "model")
    salt = where.string(body, "cache_salt", "cache_salt")
    request.cache_salt = salt or None
    request.cached_tokens = cached_tokens_of(request.usage)
    return request


def _is_anthropic_block_type(kind: object) -> bool:
    """Whether a content block's `type` names an Anthropic block (any JSON value may be there:
    the shape is checked when the request is loaded)."""
    return isinstance(kind, str) and kind in _ANTHROPIC_BLOCK_TYPES


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
                    _is_anthropic_block_type(block.get("type")) or "cache_control" in block
                ):
                    return True
    return False


def _text_of_parts(parts: list[Any], path: str, where: Where) -> tuple[str, int | None]:
    """Join text parts with newlines (as vLLM does); also return the index of a single part.

    Parts must be objects; a `text` part's `text` must be a string. Other parts (images,
    audio, files) hold no text.
    """
    texts = []
    for index, part in enumerate(where.items(parts, path, "a content part object")):
        if part.get("type", "text") == "text" or "text" in part:
            text = where.string(part, "text", f"{path}[{index}].text")
            if text is not None:
                texts.append((index, text))
    if len(texts) == 1:
        return texts[0][1], texts[0][0]
    return "\n".join(text for _, text in texts), None


def _role(message: dict[str, Any], path: str, where: Where, roles: tuple[str, ...]) -> str:
    role = message.get("role")
    if not isinstance(role, str):
        raise where.error(
            f"{path}.role", f"must be a string ({', '.join(roles)}), got {json_kind(role)}"
        )
    if role not in roles:
        raise where.error(f"{path}.role", f"is {role!r}, expected one of {', '.join(roles)}")
    return role


def _load_openai(request: Request, body: dict[str, Any], where: Where) -> None:
    request.kind = KIND_OPENAI
    for index, message in enumerate(body["messages"]):
        path = f"messages[{index}]"
        normalized: dict[str, Any] = {"role": _role(message, path, where, ROLES)}
        request.origins[f"messages[{len(request.messages)}]"] = path
        content = message.get("content")
        if isinstance(content, list):
            text, single = _text_of_parts(content, f"{path}.content", where)
            normalized["content"] = text
            if single is not None:
                request.origins[f"messages[{len(request.messages)}].content"] = (
                    f"{path}.content[{single}].text"
                )
        elif isinstance(content, str):
            normalized["content"] = content
        elif content is not None:
            raise where.expect(
                content, f"{path}.content", "a string, a list of content parts or null"
            )
        for key in _MESSAGE_TEXT_KEYS:
            if key in message:
                value = where.string(message, key, f"{path}.{key}")
                if value is not None:
                    normalized[key] = value
        calls = (
            where.list(message, "tool_calls", f"{path}.tool_calls")
            if "tool_calls" in message
            else None
        )
        if calls is not None:
            normalized["tool_calls"] = [
                _openai_tool_call(call, f"{path}.tool_calls[{number}]", where)
                for number, call in enumerate(
                    where.items(calls, f"{path}.tool_calls", "a tool call object")
                )
            ]
        request.messages.append(normalized)
    tools = where.list(body, "tools", "tools")
    for index, tool in enumerate(where.items(tools or [], "tools", "a tool object")):
        function = where.object(tool, "function", f"tools[{index}].function")
        if function is not None:
            _check_function(function, f"tools[{index}].function", where)
        request.tools.append(tool)


def _openai_tool_call(call: dict[str, Any], path: str, where: Where) -> dict[str, Any]:
    where.identifier(call, "id", f"{path}.id")
    function = dict(where.object(call, "function", f"{path}.function") or {})
    where.string(function, "name", f"{path}.function.name")
    if "arguments" in function:
        arguments = function["arguments"]
        if not isinstance(arguments, str | dict):
            raise where.expect(
                arguments, f"{path}.function.arguments", "a JSON string or an object"
            )
        function["arguments"] = parse_arguments(arguments)
        if isinstance(arguments, str):  # the parsed JSON string nests too
            where.check_nesting(function["arguments"], f"{path}.function.arguments")
    return {**call, "function": function}


def _check_function(function: dict[str, Any], path: str, where: Where) -> None:
    """A tool definition's fields that templates and rules read."""
    where.string(function, "name", f"{path}.name")
    where.string(function, "description", f"{path}.description")
    where.object(function, "parameters", f"{path}.parameters")


def _load_anthropic(request: Request, body: dict[str, Any], where: Where) -> None:
    request.kind = KIND_ANTHROPIC
    system = body.get("system")
    if isinstance(system, str):
        request.messages.append({"role": "system", "content": system})
        request.origins["messages[0].content"] = "system"
    elif isinstance(system, list):
        text, single = _text_of_parts(system, "system", where)
        request.messages.append({"role": "system", "content": text})
        request.origins["messages[0].content"] = (
            f"system[{single}].text" if single is not None else "system"
        )
        for index, block in enumerate(system):
            if where.object(block, "cache_control", f"system[{index}].cache_control"):
                request.breakpoints.append(f"system[{index}]")
    elif system is not None:
        raise where.expect(system, "system", "a string, a list of text blocks or null")
    for index, message in enumerate(body["messages"]):
        _role(message, f"messages[{index}]", where, ANTHROPIC_ROLES)
        _append_anthropic_message(request, index, message, where)
    tools = where.list(body, "tools", "tools")
    for index, tool in enumerate(where.items(tools or [], "tools", "a tool object")):
        path = f"tools[{index}]"
        if where.object(tool, "cache_control", f"{path}.cache_control"):
            request.breakpoints.append(path)
        name = where.string(tool, "name", f"{path}.name")
        function_type = where.string(tool, "type", f"{path}.type")
        if "input_schema" not in tool:  # server tools (web search...) carry no schema
            request.tools.append({"type": function_type or "function", "name": name})
            continue
        function = {"name": name, "description": tool.get("description", "")}
        where.string(tool, "description", f"{path}.description")
        function["parameters"] = where.object(tool, "input_schema", f"{path}.input_schema")
        request.origins[f"tools[{len(request.tools)}].function.parameters"] = f"{path}.input_schema"
        request.origins[f"tools[{len(request.tools)}].function"] = path
        request.tools.append({"type": "function", "function": function})


def _append_anthropic_message(
    request: Request, index: int, message: dict[str, Any], where: Where
) -> None:
    role, content = message["role"], message.get("content")
    if isinstance(content, str):
        request.origins[f"messages[{len(request.messages)}]"] = f"messages[{index}]"
        request.messages.append({"role": role, "content": content})
        return
    if content is None:
        request.origins[f"messages[{len(request.messages)}]"] = f"messages[{index}]"
        request.messages.append({"role": role, "content": ""})
        return
    if not isinstance(content, list):
        raise where.expect(
            content, f"messages[{index}].content", "a string, a list of content blocks or null"
        )
    texts: list[str] = []
    normalized: dict[str, Any] = {"role": role}
    calls: list[dict[str, Any]] = []
    first_text_block = None
    blocks = where.items(content, f"messages[{index}].content", "a content block object")
    for block_index, block in enumerate(blocks):
        path = f"messages[{index}].content[{block_index}]"
        if where.object(block, "cache_control", f"{path}.cache_control") is not None:
            request.breakpoints.append(path)
        kind = where.string(block, "type", f"{path}.type")
        if kind == "text":
            text = where.string(block, "text", f"{path}.text")
            if text is not None:
                first_text_block = block_index if first_text_block is None else first_text_block
                texts.append(text)
        elif kind == "thinking":
            thinking = where.string(block, "thinking", f"{path}.thinking")
            if thinking is not None:
                normalized["reasoning_content"] = thinking
        elif kind == "tool_use":
            calls.append(tool_use_call(where, block, path, "id"))
        elif kind == "tool_result":
            result = block.get("content")
            if isinstance(result, list):
                result, _ = _text_of_parts(result, f"{path}.content", where)
            elif result is not None and not isinstance(result, str):
                raise where.expect(result, f"{path}.content", "a string, a list of blocks or null")
            position = len(request.messages)
            request.origins[f"messages[{position}]"] = path
            request.messages.append(
                {
                    "role": "tool",
                    "tool_call_id": where.identifier(block, "tool_use_id", f"{path}.tool_use_id"),
                    "content": result or "",
                }
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
