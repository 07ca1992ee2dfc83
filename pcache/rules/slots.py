"""Named places of a request that rules compare across requests ("the same slot").

A slot is a key that means the same thing in two requests of one session or app: the n-th
system message, a tool's description by tool name, a history message by index. Paths returned
here are normalized (`messages[2].content`); `Request.source_path` maps them to the user's JSON.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import orjson

from pcache.prompt.request import Request, tool_name

PREFIX_ROLES = ("system", "developer")


def tool_function(tool: dict[str, Any]) -> dict[str, Any]:
    function = tool.get("function")
    return function if isinstance(function, dict) else tool


def prefix_texts(request: Request) -> Iterator[tuple[tuple, str, str]]:
    """(slot, normalized path, text) for text that every request of an app sends again.

    System and developer messages ahead of the first turn, tool names and tool descriptions.
    History, tool results and user turns are not included: once written they stay stable.
    """
    for index, message in enumerate(request.messages):
        if message["role"] not in PREFIX_ROLES:
            break
        content = message.get("content")
        if isinstance(content, str):
            yield ("system", index), f"messages[{index}].content", content
    for index, tool in enumerate(request.tools):
        function = tool_function(tool)
        name = tool_name(tool)
        path = f"tools[{index}].function" if "function" in tool else f"tools[{index}]"
        yield ("tool-name", index), f"{path}.name", name
        description = function.get("description")
        if isinstance(description, str):
            yield ("tool", name, "description"), f"{path}.description", description


def canonical(value: Any) -> bytes:
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS)


def exact(value: Any) -> bytes:
    return orjson.dumps(value)


_STEP = re.compile(r"\.?([^.\[\]]+)|\[(\d+)\]")


def resolve(document: Any, path: str) -> Any:
    """The value at a source path such as `messages[2].tool_calls[0].function.arguments`."""
    value = document
    for name, index in _STEP.findall(path):
        if index:
            if not isinstance(value, list) or int(index) >= len(value):
                return None
            value = value[int(index)]
        else:
            if not isinstance(value, dict) or name not in value:
                return None
            value = value[name]
    return value


def raw_message(request: Request, index: int) -> Any:
    """The user's own JSON of normalized message `index` (body-relative)."""
    key = f"messages[{index}]"
    path = request.origins.get(key) or request.source_path(key)
    if request.path_prefix and path.startswith(request.path_prefix + "."):
        path = path[len(request.path_prefix) + 1 :]
    return resolve(request.raw, path)


def history_key(message: dict[str, Any]) -> tuple:
    """A message as the cache sees it, minus what dedicated rules already report.

    Whitespace drift (PC107), tool-call ids (PC304), argument key order (PC202), re-serialized
    tool results (PC203), number formatting (PC204) and dropped reasoning (PC404)
    are taken out, so PC401/PC402 report only what no other rule explains.
    """
    from pcache.rules.patterns import normalize_whitespace

    content = message.get("content")
    if message["role"] == "tool" and isinstance(content, str):
        text = canonical_text(content)  # re-serialized results: PC203, numbers: PC204
    elif isinstance(content, str):
        text = normalize_numbers(normalize_whitespace(content))
    else:
        text = repr(content)
    calls = tuple(
        (
            tool_function(call).get("name"),
            normalize_numbers(canonical(tool_function(call).get("arguments")).decode()),
        )
        for call in message.get("tool_calls") or []
    )
    return (message["role"], text, calls)


NUMBER = re.compile(r"(?<![\w.])-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?(?!\w)(?!\.\d)")


def normalize_numbers(text: str) -> str:
    """Every number written in one canonical way (`1.0`, `1`, `1e0` all become `1.0`)."""
    return NUMBER.sub(lambda match: repr(float(match.group(0))), text)


def canonical_text(text: str) -> str:
    """Text of a JSON value with its keys sorted and numbers written one way; other text with
    its numbers written one way."""
    stripped = text.strip()
    if stripped[:1] in ("{", "["):
        try:
            return normalize_numbers(canonical(orjson.loads(stripped)).decode())
        except (orjson.JSONDecodeError, TypeError):
            pass
    return normalize_numbers(stripped)


def raw_path(request: Request, path: str) -> str:
    """A path inside the body as sent, prefixed like `Request.source_path` does."""
    return f"{request.path_prefix}.{path}" if request.path_prefix else path


def content_blocks(request: Request) -> list[str]:
    """Anthropic cache block positions in prefix order: tools, system blocks, message blocks."""
    raw = request.raw
    blocks = [f"tools[{i}]" for i, _ in enumerate(raw.get("tools") or [])]
    system = raw.get("system")
    if isinstance(system, list):
        blocks += [f"system[{i}]" for i, _ in enumerate(system)]
    elif system:
        blocks.append("system")
    for index, message in enumerate(raw.get("messages") or []):
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(content, list):
            blocks += [f"messages[{index}].content[{j}]" for j, _ in enumerate(content)]
        else:
            blocks.append(f"messages[{index}]")
    return blocks


OPENAI_MODEL = re.compile(r"^(?:gpt-(?!oss)|o\d|chatgpt-|codex-)", re.IGNORECASE)


def openai_applies(request: Request, profile_name: str) -> bool:
    """OpenAI-specific rules apply: an OpenAI-shaped body sent to OpenAI (by `--profile openai`
    or by an OpenAI model name; open-weight models such as gpt-oss are served elsewhere)."""
    if request.kind != "openai":
        return False
    return profile_name == "openai" or bool(OPENAI_MODEL.match(request.model or ""))
