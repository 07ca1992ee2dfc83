"""Amazon Bedrock Converse bodies (`POST /model/{modelId}/converse`) in the common chat shape.

Read: `system` (text blocks), `messages` (`role` user or assistant) with `text`, `image` /
`document` / `video` blocks (no text of their own), `toolUse`, `toolResult` (its `text` and
`json` parts), `reasoningContent`, and `toolConfig.tools[].toolSpec` (`inputSchema.json`).
`cachePoint` blocks may stand after tools, after system blocks and after content blocks: each
is a breakpoint (`Request.breakpoints` holds its path) that caches everything before it, in
the order tools, system, messages. `inferenceConfig`, `toolChoice` and
`additionalModelRequestFields` stay in the body. The model comes from the body's `modelId` or
the URL of a recorder line.
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import unquote

from pcache.prompt.renderers.harmony_json import compact_json
from pcache.prompt.shapes.fields import Where
from pcache.prompt.shapes.request_record import (
    KIND_BEDROCK,
    Request,
    read_sidecar,
    tool_use_call,
)

SHAPE = "bedrock"
ROLES = ("user", "assistant")
BLOCK_KEYS = (
    "text",
    "image",
    "document",
    "video",
    "toolUse",
    "toolResult",
    "reasoningContent",
    "cachePoint",
    "guardContent",
)
SILENT_BLOCKS = ("image", "document", "video", "guardContent")
_MODEL_IN_URL = re.compile(r"/model/([^/]+)/converse(?:-stream)?$")


def _is_block(value: Any) -> bool:
    return isinstance(value, dict) and "type" not in value and any(k in value for k in BLOCK_KEYS)


def looks_like(body: dict[str, Any]) -> bool:
    if any(key in body for key in ("toolConfig", "inferenceConfig", "modelId")):
        return "messages" in body
    system = body.get("system")
    if isinstance(system, list) and system and all(_is_block(block) for block in system):
        return True
    messages = body.get("messages")
    for message in messages if isinstance(messages, list) else []:
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(content, list) and content:
            return all(_is_block(block) for block in content)
    return False


def read(request: Request, outer: dict[str, Any], body: dict[str, Any], where: Where) -> None:
    request.kind, request.shape = KIND_BEDROCK, SHAPE
    read_sidecar(request, outer, body, where)
    _tools(request, body, where)
    system = where.list(body, "system", "system")
    if system:
        texts = []
        for index, block in enumerate(where.items(system, "system", "a system block object")):
            if "cachePoint" in block:
                where.object(block, "cachePoint", f"system[{index}].cachePoint")
                request.breakpoints.append(f"system[{index}]")
            text = where.string(block, "text", f"system[{index}].text")
            if text is not None:
                texts.append((index, text))
        request.messages.append({"role": "system", "content": "\n".join(t for _, t in texts)})
        request.origins["messages[0]"] = "system"
        if len(texts) == 1:
            request.origins["messages[0].content"] = f"system[{texts[0][0]}].text"
    messages = body["messages"]
    if not isinstance(messages, list):
        raise where.expect(messages, "messages", "a list of messages")
    for index, message in enumerate(where.items(messages, "messages", "a message object")):
        _message(request, message, f"messages[{index}]", where)
    model = where.string(body, "modelId", "modelId")
    url = outer.get("url")
    found = _MODEL_IN_URL.search(url) if isinstance(url, str) else None
    request.model = model or (unquote(found.group(1)) if found else None)


def _message(request: Request, message: dict[str, Any], path: str, where: Where) -> None:
    role = message.get("role")
    if role not in ROLES:
        raise where.expect(role, f"{path}.role", "user or assistant")
    content = message.get("content")
    if not isinstance(content, list):
        raise where.expect(content, f"{path}.content", "a list of content blocks")
    texts: list[tuple[int, str]] = []
    normalized: dict[str, Any] = {"role": role}
    calls: list[dict[str, Any]] = []
    results: list[tuple[str, dict[str, Any]]] = []
    blocks = where.items(content, f"{path}.content", "a content block object")
    for index, block in enumerate(blocks):
        at = f"{path}.content[{index}]"
        if "cachePoint" in block:
            where.object(block, "cachePoint", f"{at}.cachePoint")
            request.breakpoints.append(at)
        elif "text" in block:
            texts.append((index, where.string(block, "text", f"{at}.text") or ""))
        elif "toolUse" in block:
            use = where.object(block, "toolUse", f"{at}.toolUse") or {}
            calls.append(tool_use_call(where, use, f"{at}.toolUse", "toolUseId"))
        elif "toolResult" in block:
            results.append((at, where.object(block, "toolResult", f"{at}.toolResult") or {}))
        elif "reasoningContent" in block:
            reasoning = where.object(block, "reasoningContent", f"{at}.reasoningContent") or {}
            text = reasoning.get("reasoningText")
            if isinstance(text, dict) and isinstance(text.get("text"), str):
                normalized["reasoning_content"] = text["text"]
            elif isinstance(reasoning.get("redactedContent"), str):
                normalized["reasoning_content"] = reasoning["redactedContent"]
        elif not any(key in block for key in SILENT_BLOCKS):
            keys = ", ".join(block) or "none"
            raise where.error(at, f"is a content block pcache does not read (keys: {keys})")
    for at, result in results:
        _result(request, result, at, where)
    if texts or calls or not results:
        position = len(request.messages)
        request.origins[f"messages[{position}]"] = path
        if len(texts) == 1:
            request.origins[f"messages[{position}].content"] = f"{path}.content[{texts[0][0]}].text"
        normalized["content"] = "\n".join(text for _, text in texts)
        if calls:
            normalized["tool_calls"] = calls
            for number, _ in enumerate(calls):
                request.origins[f"messages[{position}].tool_calls[{number}].function"] = path
        request.messages.append(normalized)


def _result(request: Request, result: dict[str, Any], at: str, where: Where) -> None:
    parts = where.list(result, "content", f"{at}.toolResult.content") or []
    texts = []
    for index, part in enumerate(where.items(parts, f"{at}.toolResult.content", "an object")):
        if "text" in part:
            texts.append(where.string(part, "text", f"{at}.toolResult.content[{index}].text"))
        elif "json" in part:
            texts.append(compact_json(part["json"]))
    position = len(request.messages)
    request.origins[f"messages[{position}]"] = at
    request.origins[f"messages[{position}].content"] = f"{at}.toolResult.content"
    request.messages.append(
        {
            "role": "tool",
            "tool_call_id": where.identifier(result, "toolUseId", f"{at}.toolResult.toolUseId"),
            "content": "\n".join(text or "" for text in texts),
        }
    )


def _tools(request: Request, body: dict[str, Any], where: Where) -> None:
    config = where.object(body, "toolConfig", "toolConfig")
    if config is None:
        return
    tools = where.list(config, "tools", "toolConfig.tools") or []
    for index, tool in enumerate(where.items(tools, "toolConfig.tools", "a tool object")):
        path = f"toolConfig.tools[{index}]"
        if "cachePoint" in tool:
            where.object(tool, "cachePoint", f"{path}.cachePoint")
            request.breakpoints.append(path)
            continue
        spec = where.object(tool, "toolSpec", f"{path}.toolSpec")
        if spec is None:
            raise where.error(path, "must hold a toolSpec or a cachePoint")
        function: dict[str, Any] = {"name": where.string(spec, "name", f"{path}.toolSpec.name")}
        description = where.string(spec, "description", f"{path}.toolSpec.description")
        if description is not None:
            function["description"] = description
        schema = where.object(spec, "inputSchema", f"{path}.toolSpec.inputSchema") or {}
        function["parameters"] = where.object(schema, "json", f"{path}.toolSpec.inputSchema.json")
        position = len(request.tools)
        request.tools.append({"type": "function", "function": function})
        request.origins[f"tools[{position}]"] = path
        request.origins[f"tools[{position}].function"] = f"{path}.toolSpec"
        request.origins[f"tools[{position}].function.parameters"] = (
            f"{path}.toolSpec.inputSchema.json"
        )
