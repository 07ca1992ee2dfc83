"""OpenTelemetry GenAI model-call spans in the common chat shape (one span, one request).

Current attribute names (semantic conventions 1.37 and later): `gen_ai.system_instructions`,
`gen_ai.input.messages` (`[{role, parts: [{type: text | tool_call | tool_call_response |
reasoning | uri | blob | file, ...}]}]`), `gen_ai.tool.definitions`, all JSON (text or
structured values). Older names (1.36 and before, as OpenLLMetry writes them): flat
`gen_ai.prompt.N.role` / `.content` / `.tool_calls.M.{id,name,arguments}` / `.tool_call_id`,
tools as `llm.request.functions.N.{name,description,parameters}`.

Usage becomes the request's observed figures: `gen_ai.usage.cache_read.input_tokens` (older:
`gen_ai.usage.cache_read_input_tokens`) the cached tokens, `gen_ai.usage.output_tokens` (older:
`gen_ai.usage.completion_tokens`) the output length. The session is `gen_ai.conversation.id`,
else `session.id`, else the trace; the arrival time is the span's start.
"""

from __future__ import annotations

import re
from typing import Any

from pcache.prompt.renderers.harmony_json import compact_json
from pcache.prompt.shapes.fields import Where
from pcache.prompt.shapes.request_record import (
    KIND_SPAN,
    Request,
    function_call,
    parse_arguments,
)
from pcache.prompt.shapes.span_attributes import (
    Attributes,
    attributes_of,
    count,
    json_attribute,
    keys_of,
    span_timestamp_ms,
)

SHAPE = "otel"
INPUT = "gen_ai.input.messages"
SYSTEM = "gen_ai.system_instructions"
TOOLS = "gen_ai.tool.definitions"
OLD_PROMPT = "gen_ai.prompt."
OLD_TOOLS = "llm.request.functions."
CACHED_KEYS = ("gen_ai.usage.cache_read.input_tokens", "gen_ai.usage.cache_read_input_tokens")
OUTPUT_KEYS = ("gen_ai.usage.output_tokens", "gen_ai.usage.completion_tokens")
INPUT_KEYS = ("gen_ai.usage.input_tokens", "gen_ai.usage.prompt_tokens")
SILENT_PARTS = ("uri", "blob", "file", "image", "audio")
_INDEXED = re.compile(r"^(\d+)\.(.+)$")


def looks_like(span: dict[str, Any]) -> bool:
    if "attributes" not in span:
        return False
    return any(
        key in (INPUT, SYSTEM) or key.startswith(OLD_PROMPT)
        for key in keys_of(span)
        if isinstance(key, str)
    )


def read(request: Request, outer: dict[str, Any], span: dict[str, Any], where: Where) -> None:
    request.kind, request.shape = KIND_SPAN, SHAPE
    attributes = attributes_of(span, where)
    read_span_context(request, span, attributes, ("gen_ai.conversation.id", "session.id"))
    request.model = _string(attributes, ("gen_ai.request.model", "gen_ai.response.model"))
    request.cached_tokens = count(attributes, CACHED_KEYS)
    request.output_length = count(attributes, OUTPUT_KEYS)
    prompt_tokens = count(attributes, INPUT_KEYS)
    request.usage = {
        key: value
        for key, value in (
            ("input_tokens", prompt_tokens),
            ("cache_read_input_tokens", request.cached_tokens),
            ("output_tokens", request.output_length),
        )
        if value is not None
    } or None
    if INPUT in attributes or SYSTEM in attributes:
        _current(request, attributes, where)
    else:
        _older(request, attributes, where)


def pin(request: Request, key: str, path: str) -> None:
    """Map a normalized message or tool, and the fields templates read in it, to `path`: the
    attribute whose JSON text holds it (a path cannot reach into that text)."""
    message = request.messages[int(key[9:-1])] if key.startswith("messages[") else None
    fields = ["", ".content", ".reasoning_content"] if message is not None else [""]
    if message is not None:
        for number, _ in enumerate(message.get("tool_calls") or []):
            at = f".tool_calls[{number}]"
            fields += [at, f"{at}.id", f"{at}.function", f"{at}.function.name"]
            fields.append(f"{at}.function.arguments")
    else:
        fields += [".function", ".function.name", ".function.description"]
        fields.append(".function.parameters")
    for field in fields:
        request.origins.setdefault(key + field, path)


def read_span_context(
    request: Request, span: dict[str, Any], attributes: Attributes, session_keys: tuple[str, ...]
) -> None:
    """Session (the first of `session_keys`, else the trace id) and arrival time of a span."""
    request.session_id = _string(attributes, session_keys)
    if request.session_id is None and isinstance(span.get("traceId"), str):
        request.session_id = f"trace:{span['traceId']}"
    request.timestamp = span_timestamp_ms(span)


def _string(attributes: Attributes, keys: tuple[str, ...]) -> str | None:
    for key in keys:
        value = attributes.get(key, (None, ""))[0]
        if isinstance(value, str) and value:
            return value
    return None


def _current(request: Request, attributes: Attributes, where: Where) -> None:
    system = json_attribute(attributes, SYSTEM, where)
    if system is not None:
        value, path = system
        text = value if isinstance(value, str) else _parts_text(value, path, where)[0]
        request.messages.append({"role": "system", "content": text})
        request.origins["messages[0]"] = path
        request.origins["messages[0].content"] = path
    found = json_attribute(attributes, INPUT, where)
    messages, path = found if found is not None else ([], "")
    if not isinstance(messages, list):
        raise where.expect(messages, path, "a JSON list of messages")
    for index, message in enumerate(where.items(messages, path, "a message object")):
        _message(request, message, path, index, where)
    tools = json_attribute(attributes, TOOLS, where)
    if tools is not None:
        value, at = tools
        if not isinstance(value, list):
            raise where.expect(value, at, "a JSON list of tool definitions")
        for tool in where.items(value, at, "a tool object"):
            add_tool(request, tool, at)


def _parts_text(parts: Any, path: str, where: Where) -> tuple[str, str | None, list[Any]]:
    """Joined text of text parts, its reasoning, and the other parts in order."""
    if not isinstance(parts, list):
        raise where.expect(parts, path, "a list of parts")
    texts, reasoning, others = [], [], []
    for part in where.items(parts, path, "a part object"):
        kind = part.get("type")
        if kind == "text":
            texts.append(str(part.get("content", "")))
        elif kind == "reasoning":
            reasoning.append(str(part.get("content", "")))
        elif kind not in SILENT_PARTS:
            others.append(part)
    return "\n".join(texts), "\n".join(reasoning) if reasoning else None, others


def _message(request: Request, message: dict[str, Any], path: str, index: int, where: Where):
    role = message.get("role")
    if not isinstance(role, str):
        raise where.error(path, f"holds a message without a role (message {index})")
    text, reasoning, others = _parts_text(message.get("parts") or [], path, where)
    calls = [part for part in others if part.get("type") == "tool_call"]
    results = [part for part in others if part.get("type") == "tool_call_response"]
    for result in results:
        response = result.get("response")
        content = response if isinstance(response, str) else compact_json(response)
        position = len(request.messages)
        request.origins[f"messages[{position}]"] = path
        request.messages.append(
            {"role": "tool", "content": content, "tool_call_id": result.get("id")}
        )
        pin(request, f"messages[{position}]", path)
    if results and not text and not calls:
        return
    normalized: dict[str, Any] = {"role": role}
    if text or not calls:
        normalized["content"] = text
    if reasoning is not None:
        normalized["reasoning_content"] = reasoning
    if calls:
        normalized["tool_calls"] = [
            function_call(
                call.get("id"), call.get("name"), parse_arguments(call.get("arguments") or {})
            )
            for call in calls
        ]
    position = len(request.messages)
    request.messages.append(normalized)
    pin(request, f"messages[{position}]", path)


def add_tool(request: Request, tool: dict[str, Any], path: str) -> None:
    position = len(request.tools)
    pin(request, f"tools[{position}]", path)
    if "function" in tool or tool.get("type", "function") != "function":
        request.tools.append(dict(tool))
        return
    function = {key: value for key, value in tool.items() if key != "type"}
    if isinstance(function.get("parameters"), str):
        function["parameters"] = parse_arguments(function["parameters"])
    request.tools.append({"type": "function", "function": function})


def indexed(attributes: Attributes, prefix: str) -> list[tuple[dict[str, Any], dict[str, str]]]:
    """`prefix.N.rest` attributes grouped by N: (values by rest, paths by rest), in N order."""
    groups: dict[int, tuple[dict[str, Any], dict[str, str]]] = {}
    for key, (value, path) in attributes.items():
        if key.startswith(prefix):
            match = _INDEXED.match(key[len(prefix) :])
            if match:
                values, paths = groups.setdefault(int(match.group(1)), ({}, {}))
                values[match.group(2)] = value
                paths[match.group(2)] = path
    return [groups[number] for number in sorted(groups)]


def _older(request: Request, attributes: Attributes, where: Where) -> None:
    for values, paths in indexed(attributes, OLD_PROMPT):
        role = values.get("role")
        if not isinstance(role, str):
            raise where.error(next(iter(paths.values())), "belongs to a message without a role")
        message: dict[str, Any] = {"role": role}
        position = len(request.messages)
        request.origins[f"messages[{position}]"] = paths["role"]
        content = values.get("content")
        if content is not None:
            message["content"] = _old_content(content)
            request.origins[f"messages[{position}].content"] = paths["content"]
        if isinstance(values.get("tool_call_id"), str):
            message["tool_call_id"] = values["tool_call_id"]
        calls: dict[int, dict[str, Any]] = {}
        for rest, value in values.items():
            match = re.match(r"^tool_calls\.(\d+)\.(id|name|arguments)$", rest)
            if match:
                calls.setdefault(int(match.group(1)), {})[match.group(2)] = value
        if calls:
            message["tool_calls"] = [
                function_call(
                    call.get("id"), call.get("name"), parse_arguments(call.get("arguments") or "{}")
                )
                for _, call in sorted(calls.items())
            ]
        request.messages.append(message)
        for index, number in enumerate(sorted(calls)):
            at = f"messages[{position}].tool_calls[{index}]"
            request.origins[at] = paths["role"]
            for name, rest in (("id", ".id"), ("name", ".function.name")):
                if f"tool_calls.{number}.{name}" in paths:
                    request.origins[at + rest] = paths[f"tool_calls.{number}.{name}"]
            arguments = paths.get(f"tool_calls.{number}.arguments")
            if arguments is not None:
                request.origins[f"{at}.function.arguments"] = arguments
    for values, paths in indexed(attributes, OLD_TOOLS):
        function = {key: values[key] for key in ("name", "description") if key in values}
        if "parameters" in values:
            function["parameters"] = parse_arguments(values["parameters"])
        at = f"tools[{len(request.tools)}]"
        request.origins[at] = request.origins[f"{at}.function"] = paths.get("name", "attributes")
        for key in ("name", "description", "parameters"):
            if key in paths:
                request.origins[f"{at}.function.{key}"] = paths[key]
        request.tools.append({"type": "function", "function": function})


def _old_content(content: Any) -> str:
    """Content as OpenLLMetry writes it: text, or a list of parts as JSON text."""
    if isinstance(content, str) and content.startswith("[{"):
        parts = parse_arguments(content)
        if isinstance(parts, list) and all(isinstance(p, dict) for p in parts):
            return "\n".join(str(p.get("text", "")) for p in parts if "text" in p)
    return content if isinstance(content, str) else compact_json(content)
