"""Gemini `generateContent` bodies (Google AI and Vertex AI) in the common chat shape.

Read: `systemInstruction` (its text parts), `contents` (`role` user or model) with `text`,
`inlineData` / `fileData` (no text of their own), `functionCall`, `functionResponse` and
thought parts (`thought: true`: reasoning), `tools[].functionDeclarations`. Both spellings the
REST API accepts (camelCase and snake_case) are read. `generationConfig`, `toolConfig` and
`safetySettings` stay in the body. The model comes from the URL of a recorder line
(`.../models/gemini-2.5-flash:generateContent`) or the body's `model`.

`cachedContent` names an explicit cache the server puts ahead of the request; its text is not
in the log, so pcache keys it as a cache namespace (`cache_salt`): requests naming the same
cached content can share a prefix, requests naming different ones cannot.

A `functionResponse` whose `response` is `{"output": text}` or `{"result": text}` (the key the
API documents for a function's output, and the one most examples use) is that text; any other
response is its JSON.
"""

from __future__ import annotations

import re
from typing import Any

from pcache.prompt.renderers.harmony_json import compact_json
from pcache.prompt.shapes.fields import Where
from pcache.prompt.shapes.request_record import KIND_GEMINI, Request, read_sidecar

SHAPE = "gemini"
ROLES = {"user": "user", "model": "assistant", "function": "tool", "tool": "tool"}
_MODEL_IN_URL = re.compile(r"/models/([^/:]+):(?:stream)?[gG]enerate[cC]ontent")


def looks_like(body: dict[str, Any]) -> bool:
    return "contents" in body and "messages" not in body


def _key(holder: dict[str, Any], camel: str) -> str:
    """The key `holder` uses for a field: camelCase, or the snake_case spelling."""
    if camel in holder:
        return camel
    snake = re.sub(r"(?<!^)([A-Z])", r"_\1", camel).lower()
    return snake if snake in holder else camel


def read(request: Request, outer: dict[str, Any], body: dict[str, Any], where: Where) -> None:
    request.kind, request.shape = KIND_GEMINI, SHAPE
    read_sidecar(request, outer, body, where)
    if request.usage is None and isinstance(outer.get("usageMetadata"), dict):
        request.usage = outer["usageMetadata"]
    system_key = _key(body, "systemInstruction")
    system = where.object(body, system_key, system_key)
    if system is not None:
        text, origin = _texts(system, system_key, where)
        request.messages.append({"role": "system", "content": text})
        request.origins["messages[0]"] = system_key
        request.origins["messages[0].content"] = origin
    contents = body["contents"]
    if not isinstance(contents, list):
        raise where.expect(contents, "contents", "a list of contents")
    for index, content in enumerate(where.items(contents, "contents", "a content object")):
        _content(request, content, f"contents[{index}]", where)
    _tools(request, body, where)
    model = where.string(body, "model", "model")
    url = outer.get("url")
    found = _MODEL_IN_URL.search(url) if isinstance(url, str) else None
    request.model = model or (found.group(1) if found else None)
    cached_key = _key(body, "cachedContent")
    cached = where.string(body, cached_key, cached_key)
    if cached:
        request.cache_salt = f"cachedContent:{cached}"


def _parts(holder: dict[str, Any], path: str, where: Where) -> list[dict[str, Any]]:
    parts = where.list(holder, "parts", f"{path}.parts")
    return where.items(parts or [], f"{path}.parts", "a part object")


def _texts(holder: dict[str, Any], path: str, where: Where) -> tuple[str, str]:
    """The text parts of `holder` joined by newlines, and the path of the text."""
    texts = []
    for index, part in enumerate(_parts(holder, path, where)):
        text = where.string(part, "text", f"{path}.parts[{index}].text")
        if text is not None:
            texts.append((index, text))
    origin = f"{path}.parts[{texts[0][0]}].text" if len(texts) == 1 else f"{path}.parts"
    return "\n".join(text for _, text in texts), origin


def _content(request: Request, content: dict[str, Any], path: str, where: Where) -> None:
    role = where.string(content, "role", f"{path}.role") or "user"
    if role not in ROLES:
        raise where.error(f"{path}.role", f"is {role!r}, expected user or model")
    texts: list[tuple[int, str]] = []
    thoughts: list[str] = []
    calls: list[tuple[int, dict[str, Any], str]] = []
    results: list[tuple[int, dict[str, Any], str]] = []
    for index, part in enumerate(_parts(content, path, where)):
        at = f"{path}.parts[{index}]"
        call_key, result_key = _key(part, "functionCall"), _key(part, "functionResponse")
        if call_key in part:
            call = where.object(part, call_key, f"{at}.{call_key}") or {}
            calls.append((index, call, call_key))
        elif result_key in part:
            result = where.object(part, result_key, f"{at}.{result_key}") or {}
            results.append((index, result, result_key))
        elif "text" in part:
            text = where.string(part, "text", f"{at}.text") or ""
            (thoughts.append(text) if part.get("thought") is True else texts.append((index, text)))
        else:
            for key in ("inlineData", "fileData", "executableCode", "codeExecutionResult"):
                where.object(part, _key(part, key), f"{at}.{_key(part, key)}")
    if texts or thoughts or calls or not results:
        message: dict[str, Any] = {"role": ROLES[role]}
        position = len(request.messages)
        request.origins[f"messages[{position}]"] = path
        if texts or not calls:
            message["content"] = "\n".join(text for _, text in texts)
            if len(texts) == 1:
                origin = f"{path}.parts[{texts[0][0]}].text"
                request.origins[f"messages[{position}].content"] = origin
        if thoughts:
            message["reasoning_content"] = "\n".join(thoughts)
        if calls:
            message["tool_calls"] = [
                _call(request, position, number, call, f"{path}.parts[{index}].{key}", where)
                for number, (index, call, key) in enumerate(calls)
            ]
        request.messages.append(message)
    for index, result, key in results:
        _result(request, result, f"{path}.parts[{index}]", f"{path}.parts[{index}].{key}", where)


def _call(
    request: Request, position: int, number: int, call: dict[str, Any], at: str, where: Where
) -> dict[str, Any]:
    name = where.string(call, "name", f"{at}.name")
    arguments = where.object(call, "args", f"{at}.args") or {}
    entry: dict[str, Any] = {"type": "function", "function": {"name": name, "arguments": arguments}}
    identifier = where.identifier(call, "id", f"{at}.id")
    if identifier is not None:
        entry = {"id": identifier, **entry}
    base = f"messages[{position}].tool_calls[{number}]"
    request.origins[base] = at
    request.origins[f"{base}.function"] = at
    request.origins[f"{base}.function.arguments"] = f"{at}.args"
    return entry


def _result(request: Request, result: dict[str, Any], part: str, at: str, where: Where) -> None:
    name = where.string(result, "name", f"{at}.name")
    response = where.object(result, "response", f"{at}.response") or {}
    key, only = next(iter(response.items())) if len(response) == 1 else (None, None)
    plain = key in ("output", "result") and isinstance(only, str)
    text = only if plain else compact_json(response)
    message: dict[str, Any] = {"role": "tool", "content": text}
    identifier = where.identifier(result, "id", f"{at}.id")
    if identifier is not None:
        message["tool_call_id"] = identifier
    if name is not None:
        message["name"] = name
    position = len(request.messages)
    request.origins[f"messages[{position}]"] = part
    request.origins[f"messages[{position}].content"] = f"{at}.response"
    request.messages.append(message)


def _tools(request: Request, body: dict[str, Any], where: Where) -> None:
    tools = where.list(body, "tools", "tools")
    for index, tool in enumerate(where.items(tools or [], "tools", "a tool object")):
        key = _key(tool, "functionDeclarations")
        declarations = where.list(tool, key, f"tools[{index}].{key}")
        if declarations is None:
            request.tools.append(dict(tool))  # googleSearch, codeExecution...: as sent
            request.origins[f"tools[{len(request.tools) - 1}]"] = f"tools[{index}]"
            continue
        for number, declaration in enumerate(
            where.items(declarations, f"tools[{index}].{key}", "a function declaration object")
        ):
            path = f"tools[{index}].{key}[{number}]"
            where.string(declaration, "name", f"{path}.name")
            where.string(declaration, "description", f"{path}.description")
            function = dict(declaration)
            schema_key = _key(declaration, "parametersJsonSchema")
            if "parameters" not in function and schema_key in function:
                function = {
                    ("parameters" if k == schema_key else k): v for k, v in function.items()
                }
            where.object(function, "parameters", f"{path}.parameters")
            position = len(request.tools)
            request.tools.append({"type": "function", "function": function})
            request.origins[f"tools[{position}]"] = path
            request.origins[f"tools[{position}].function"] = path
