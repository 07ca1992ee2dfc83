"""Named places of a request that rules compare across requests ("the same slot").

A slot is a key that means the same thing in two requests of one session or app: the n-th
system message, a tool's description by tool name, a history message by index. Paths returned
here are normalized (`messages[2].content`); `Request.source_path` maps them to the user's JSON.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from functools import lru_cache
from typing import Any

import orjson

from pcache.divergence.history import PREFIX_ROLES, tool_function
from pcache.prompt.shapes.request import Request, tool_name


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


def exact(value: Any) -> bytes:
    return orjson.dumps(value)


_STEP = re.compile(r"\.?([^.\[\]]+)|\[(\d+)\]")


@lru_cache(maxsize=4096)
def _steps(path: str) -> tuple[str | int, ...]:
    """The keys (str) and list indexes (int) of a source path, in order."""
    return tuple(int(index) if index else name for name, index in _STEP.findall(path))


def resolve(document: Any, path: str) -> Any:
    """The value at a source path such as `messages[2].tool_calls[0].function.arguments`."""
    value = document
    for step in _steps(path):
        if type(step) is int:
            if not isinstance(value, list) or step >= len(value):
                return None
            value = value[step]
        else:
            if not isinstance(value, dict) or step not in value:
                return None
            value = value[step]
    return value


def raw_messages(request: Request) -> list | None:
    """The body's own message list when normalized message `i` is its item `i` for every
    message (what `raw_message` then gives); None when they differ (another wire shape,
    messages made from several parts)."""
    raw = request.raw.get("messages")
    if not isinstance(raw, list) or len(raw) != len(request.messages):
        return None
    keys = _message_keys(len(raw))
    return raw if list(map(request.origins.get, keys)) == keys else None


@lru_cache(maxsize=256)
def _message_keys(count: int) -> list[str]:
    """The normalized paths of `count` messages (callers do not change the list)."""
    return [f"messages[{index}]" for index in range(count)]


def raw_message(request: Request, index: int) -> Any:
    """The user's own JSON of normalized message `index` (body-relative)."""
    key = f"messages[{index}]"
    path = request.origins.get(key) or request.source_path(key)
    if request.path_prefix and path.startswith(request.path_prefix + "."):
        path = path[len(request.path_prefix) + 1 :]
    return resolve(request.raw, path)


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
