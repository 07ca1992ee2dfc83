"""How the message history of one request relates to an earlier request of its conversation.

Messages are compared as the cache sees them minus what a more specific cause explains
(`history_key`): whitespace, tool-call ids, argument key order, re-serialized tool results,
number formatting and dropped reasoning are taken out, so that what remains is an edit, a
window, a compaction, a clipping or a moved system message.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from typing import Any

import orjson

PREFIX_ROLES = ("system", "developer")


def prefix_count(messages: list[dict[str, Any]]) -> int:
    """How many system and developer messages stand ahead of the first turn."""
    head = 0
    while head < len(messages) and messages[head].get("role") in PREFIX_ROLES:
        head += 1
    return head


@dataclass(frozen=True, slots=True)
class HistoryChange:
    """`kind`: append (fine), window (head dropped), compaction (several messages replaced by
    one), clipping (a message shortened in place), system-injection (system messages moved or
    re-injected mid-history), edit, deletion, insertion, reorder."""

    kind: str
    index: int
    dropped: int = 0


def compare_messages(
    old_messages: list[dict[str, Any]], new_messages: list[dict[str, Any]]
) -> HistoryChange:
    """How `new_messages` (a later request) relates to `old_messages` (an earlier one of the
    same conversation)."""
    if new_messages[: len(old_messages)] == old_messages:  # the common case, at C speed
        return HistoryChange("append", len(old_messages))
    old = [history_key(message) for message in old_messages]
    new = [history_key(message) for message in new_messages]
    return _classify(old, new, old_messages, new_messages)


def _classify(old: list[tuple], new: list[tuple], old_messages, new_messages) -> HistoryChange:
    change = _compare(old, new)
    if change.kind in ("append", "window"):
        return change
    injected = _system_injection(old, new)
    if injected is not None:
        return injected
    index = change.index
    if change.kind in ("edit", "deletion") and index < len(new):
        tail = len(old) - index
        for collapsed in range(2, tail):  # messages index..index+collapsed-1 became one
            rest = old[index + collapsed :]
            if new[index + 1 : index + 1 + len(rest)] == rest:
                return HistoryChange("compaction", index, collapsed)
    if (
        change.kind == "edit"
        and index < len(new)
        and _clipped(old, new, index, old_messages, new_messages)
    ):
        return HistoryChange("clipping", index)
    return change


CLIP_MARKERS = ("truncated", "clipped", "omitted", "[...]", "…", "...")


def _clipped(old, new, index, old_messages, new_messages) -> bool:
    if old[index][0] != new[index][0] or old[index + 1 :] != new[index + 1 : len(old)]:
        return False
    before, after = old_messages[index].get("content"), new_messages[index].get("content")
    if not isinstance(before, str) or not isinstance(after, str) or len(after) >= len(before):
        return False
    kept = after.rstrip()
    for marker in CLIP_MARKERS:
        kept = kept.removesuffix(marker).rstrip()
    return (len(kept) > 0 and before.startswith(kept)) or any(m in after for m in CLIP_MARKERS)


def _system_injection(old: list[tuple], new: list[tuple]) -> HistoryChange | None:
    """Old and new differ only in where system/developer messages after the first turn sit
    (an old one moved, replaced or removed)."""

    def strip(keys: list[tuple]) -> list[tuple]:
        head = 0
        while head < len(keys) and keys[head][0] in PREFIX_ROLES:
            head += 1
        return keys[:head] + [key for key in keys[head:] if key[0] not in PREFIX_ROLES]

    old_core, new_core = strip(old), strip(new)
    if len(old_core) == len(old):
        return None  # no system message to move: a new one in the middle is an insertion
    if new_core[: len(old_core)] != old_core:
        return None
    index = next(i for i in range(len(old)) if i >= len(new) or old[i] != new[i])
    return HistoryChange("system-injection", index)


def _compare(old: list[tuple], new: list[tuple]) -> HistoryChange:
    if new[: len(old)] == old:
        return HistoryChange("append", len(old))
    head = 0
    while head < len(old) and old[head][0] in PREFIX_ROLES:
        head += 1
    index = next(i for i in range(len(old)) if i >= len(new) or old[i] != new[i])
    if index >= head:
        for dropped in range(1, len(old) - head):
            rest = old[head + dropped :]
            if new[head : head + len(rest)] == rest and len(new) > head + len(rest) - 1:
                return HistoryChange("window", head, dropped)
    if index < len(new) and old[index + 1 :] == new[index : index + len(old) - index - 1]:
        return HistoryChange("deletion", index)
    if index < len(new) and new[index + 1 : index + 1 + len(old) - index] == old[index:]:
        return HistoryChange("insertion", index)
    if sorted(old[index:]) == sorted(new[index : len(old)]):
        return HistoryChange("reorder", index)
    return HistoryChange("edit", index)


def normalize_whitespace(text: str) -> str:
    """CRLF to LF, trailing spaces stripped per line, NFC, ends stripped."""
    if text.isascii() and "\r" not in text and " \n" not in text and "\t\n" not in text:
        return text.strip()
    text = unicodedata.normalize("NFC", text.replace("\r\n", "\n").replace("\r", "\n"))
    return "\n".join(line.rstrip() for line in text.split("\n")).strip()


def squash(text: str) -> str:
    """Text with every run of whitespace one space, in NFC: what whitespace drift keeps. ASCII
    text with no whitespace but single spaces between words is its own (checked with
    substring searches, several times faster than one regex over the text)."""
    if (
        text.isascii()
        and "  " not in text
        and text[:1] != " "
        and text[-1:] != " "
        and not any(space in text for space in _OTHER_ASCII_SPACES)
    ):
        return text
    return " ".join(unicodedata.normalize("NFC", text).split())


_OTHER_ASCII_SPACES = "".join(c for c in map(chr, range(128)) if c.isspace() and c != " ")
"""The ASCII characters other than a space that `str.split` cuts at."""


def tool_function(tool: dict[str, Any]) -> dict[str, Any]:
    function = tool.get("function")
    return function if isinstance(function, dict) else tool


def canonical(value: Any) -> bytes:
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS)


def history_key(message: dict[str, Any]) -> tuple:
    """A message as the cache sees it, minus what more specific causes explain (see above)."""
    content = message.get("content")
    if message["role"] == "tool" and isinstance(content, str):
        text = canonical_text(content)
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
