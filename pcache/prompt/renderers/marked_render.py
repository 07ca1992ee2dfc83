"""Exact provenance of message text: render once more with every content string fenced.

Each message's `content` and reasoning string is wrapped in private-use sentinels
(U+F0000, an id character, ..., U+F0001) and the template is rendered again. If removing the
sentinels gives back exactly the real rendered text, the template copied those strings
verbatim (or transformed them in place) and the sentinels mark where each one landed, even a
one-word message that also occurs in the template's own text. If the template inspected or cut
the strings (`split`, `trim`, `startswith`...), the check fails and the caller falls back to
searching for them.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from pcache.prompt.shapes.reasoning import TEMPLATE_REASONING_KEYS

OPEN = "\U000f0000"
CLOSE = "\U000f0001"
FIRST_ID = 0xF0100
LAST_ID = 0xFFFFD
_SENTINEL = re.compile(f"{OPEN}([\U000f0100-\U000ffffd])|{CLOSE}")


def _marked_key(message: dict[str, Any]) -> list[str]:
    """Keys whose strings are fenced: `content` and the reasoning key templates will see."""
    keys = ["content"] if isinstance(message.get("content"), str) and message["content"] else []
    reasoning = next((key for key in TEMPLATE_REASONING_KEYS if message.get(key) is not None), None)
    if reasoning is not None and isinstance(message[reasoning], str) and message[reasoning]:
        keys.append(reasoning)
    return keys


def mark_messages(messages: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[str]] | None:
    """Copies of the messages with fenced strings, and the normalized path of each fence id."""
    marked: list[dict[str, Any]] = []
    paths: list[str] = []
    for index, message in enumerate(messages):
        copy = dict(message)
        for key in _marked_key(message):
            value = message[key]
            if OPEN in value or CLOSE in value or FIRST_ID + len(paths) > LAST_ID:
                return None
            copy[key] = OPEN + chr(FIRST_ID + len(paths)) + value + CLOSE
            paths.append(f"messages[{index}].{key}")
        marked.append(copy)
    return marked, paths


def strip_sentinels(marked_text: str, paths: list[str]) -> tuple[str, list[tuple[int, int, str]]]:
    """The text without sentinels and the (start, end, path) ranges they fenced; ValueError if
    they are unbalanced or nested (the template cut a string)."""
    parts: list[str] = []
    ranges: list[tuple[int, int, str]] = []
    length, last, open_at, open_id = 0, 0, -1, -1
    for match in _SENTINEL.finditer(marked_text):
        piece = marked_text[last : match.start()]
        parts.append(piece)
        length += len(piece)
        last = match.end()
        if match.group(1) is not None:
            if open_at >= 0:
                raise ValueError("nested sentinels")
            open_at, open_id = length, ord(match.group(1)) - FIRST_ID
        else:
            if open_at < 0 or not 0 <= open_id < len(paths):
                raise ValueError("unbalanced sentinels")
            if length > open_at:
                ranges.append((open_at, length, paths[open_id]))
            open_at = -1
    if open_at >= 0:
        raise ValueError("unbalanced sentinels")
    parts.append(marked_text[last:])
    return "".join(parts), ranges


def exact_message_ranges(
    text: str, messages: list[dict[str, Any]], render: Callable[[list[dict[str, Any]]], str]
) -> tuple[list[tuple[int, int, str]], set[str]] | None:
    """Where each fenced string landed in `text`, and the set of fenced paths; None if the
    template did not copy them verbatim."""
    prepared = mark_messages(messages)
    if prepared is None or not prepared[1]:
        return None
    marked, paths = prepared
    try:
        stripped, ranges = strip_sentinels(render(marked), paths)
    except Exception:  # the template reacted to the sentinels: fall back to searching
        return None
    if stripped != text:
        return None
    return ranges, set(paths)
