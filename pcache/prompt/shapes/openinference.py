"""OpenInference LLM spans (Phoenix, Arize) in the common chat shape (one span, one request).

Messages are flattened attributes: `llm.input_messages.N.message.role`, `.message.content` or
`.message.contents.M.message_content.{type,text}`, `.message.tool_calls.K.tool_call.{id,
function.name, function.arguments}`, `.message.tool_call_id`, `.message.name`; tools are
`llm.tools.N.tool.json_schema` (a tool's JSON). The model is `llm.model_name`, the session
`session.id` (else the trace). `llm.token_count.prompt_details.cache_read` is the observed
cached tokens, `llm.token_count.completion` the output length.
"""

from __future__ import annotations

import re
from typing import Any

from pcache.prompt.shapes.fields import Where
from pcache.prompt.shapes.otel_spans import add_tool, indexed, read_span_context
from pcache.prompt.shapes.request_record import (
    KIND_SPAN,
    Request,
    function_call,
    parse_arguments,
)
from pcache.prompt.shapes.span_attributes import attributes_of, count, keys_of

SHAPE = "openinference"
MESSAGES = "llm.input_messages."
TOOLS = "llm.tools."
_CALL = re.compile(
    r"^message\.tool_calls\.(\d+)\.tool_call\.(id|function\.name|function\.arguments)$"
)
_PART = re.compile(r"^message\.contents\.(\d+)\.message_content\.(type|text)$")


def looks_like(span: dict[str, Any]) -> bool:
    if "attributes" not in span:
        return False
    return any(isinstance(key, str) and key.startswith(MESSAGES) for key in keys_of(span))


def read(request: Request, outer: dict[str, Any], span: dict[str, Any], where: Where) -> None:
    request.kind, request.shape = KIND_SPAN, SHAPE
    attributes = attributes_of(span, where)
    read_span_context(request, span, attributes, ("session.id",))
    model = attributes.get("llm.model_name", (None, ""))[0]
    request.model = model if isinstance(model, str) else None
    request.cached_tokens = count(attributes, ("llm.token_count.prompt_details.cache_read",))
    request.output_length = count(attributes, ("llm.token_count.completion",))
    for values, paths in indexed(attributes, MESSAGES):
        role = values.get("message.role")
        if not isinstance(role, str):
            raise where.error(next(iter(paths.values())), "belongs to a message without a role")
        position = len(request.messages)
        request.origins[f"messages[{position}]"] = paths["message.role"]
        message: dict[str, Any] = {"role": role}
        content = values.get("message.content")
        parts: dict[int, dict[str, Any]] = {}
        calls: dict[int, dict[str, Any]] = {}
        for rest, value in values.items():
            if match := _PART.match(rest):
                parts.setdefault(int(match.group(1)), {})[match.group(2)] = value
            elif match := _CALL.match(rest):
                calls.setdefault(int(match.group(1)), {})[match.group(2)] = value
        if isinstance(content, str):
            message["content"] = content
            request.origins[f"messages[{position}].content"] = paths["message.content"]
        elif parts:
            texts = [p.get("text") for _, p in sorted(parts.items()) if p.get("type") == "text"]
            message["content"] = "\n".join(str(text) for text in texts if text is not None)
        elif not calls:
            message["content"] = ""
        for key in ("name", "tool_call_id"):
            if isinstance(values.get(f"message.{key}"), str):
                message[key] = values[f"message.{key}"]
        if calls:
            message["tool_calls"] = [
                function_call(
                    call.get("id"),
                    call.get("function.name"),
                    parse_arguments(call.get("function.arguments") or "{}"),
                )
                for _, call in sorted(calls.items())
            ]
        request.messages.append(message)
        for index, number in enumerate(sorted(calls)):
            at = f"messages[{position}].tool_calls[{index}]"
            for name, rest in (
                ("id", ".id"),
                ("function.name", ".function.name"),
                ("function.arguments", ".function.arguments"),
            ):
                key = f"message.tool_calls.{number}.tool_call.{name}"
                if key in paths:
                    request.origins[at + rest] = paths[key]
    for values, paths in indexed(attributes, TOOLS):
        schema = values.get("tool.json_schema")
        tool = parse_arguments(schema) if isinstance(schema, str) else schema
        if not isinstance(tool, dict):
            raise where.expect(tool, paths.get("tool.json_schema", "attributes"), "a tool's JSON")
        add_tool(request, tool, paths["tool.json_schema"])
