"""JSON paths as pcache prints them: `messages[2].content`, `tools[0].function.parameters`."""

from __future__ import annotations

import re
from typing import Any

_TOKEN = re.compile(r"\.?([^.\[\]]+)|\[(\d+)\]")


def parse_path(path: str) -> list[str | int]:
    parts: list[str | int] = []
    for match in _TOKEN.finditer(path):
        key, index = match.groups()
        parts.append(int(index) if index is not None else key)
    return parts


def get_path(value: Any, path: str | list[str | int], default: Any = None) -> Any:
    parts = parse_path(path) if isinstance(path, str) else path
    for part in parts:
        in_list = isinstance(part, int) and isinstance(value, list) and part < len(value)
        in_dict = isinstance(part, str) and isinstance(value, dict) and part in value
        if in_list or in_dict:
            value = value[part]
        else:
            return default
    return value


def head(path: str) -> tuple[str | None, int | None]:
    """The top-level key and its index: `messages[2].content` -> ("messages", 2)."""
    parts = parse_path(path)
    key = parts[0] if parts and isinstance(parts[0], str) else None
    index = parts[1] if len(parts) > 1 and isinstance(parts[1], int) else None
    return key, index
