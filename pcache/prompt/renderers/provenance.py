"""Provenance for text rendered by an opaque chat template: find the request's strings in it.

A Jinja template is a program, so pcache cannot know which output character came from which
input. Message text is placed exactly when the template copies it verbatim (`marked_render`);
everything else is located by searching the rendered text:

1. tools first: each tool as the template would dump it (`tojson`, compact or indented, the whole
   tool, its `function` or its `parameters`), tiled so every JSON key and value maps to its own
   path (`tools[1].function.parameters.properties.city`); a tool not found whole falls back to
   its leaf strings;
2. then messages in order, each searched after the previous one: content (also trimmed) and
   reasoning when they were not placed exactly, tool-call names and arguments (dumped like
   tools).

Matches never overlap, so the spans come out sorted and disjoint. Characters left unclaimed were
written by the template. A very short string may be credited to template text that precedes it.
"""

from __future__ import annotations

import json
from bisect import bisect_right
from collections.abc import Callable, Iterator
from typing import Any

from pcache.prompt.renderers.marked_render import exact_message_ranges
from pcache.prompt.renderers.rendered import Span
from pcache.prompt.shapes.reasoning import TEMPLATE_REASONING_KEYS
from pcache.prompt.shapes.request import Request

DUMP_INDENTS = (None, 4, 2)
MIN_FALLBACK_CHARS = 3
"""Leaf strings shorter than this are not searched for when a whole JSON dump was not found."""


def json_pieces(value: Any, path: str, indent: int | None = None) -> list[tuple[str, str]]:
    """`json.dumps(value, ensure_ascii=False, indent=indent)` cut into (text, path) pieces.

    A key and its value belong to the child's path; brackets and separators to the container's.
    """
    pieces: list[tuple[str, str]] = []
    item_separator = ", " if indent is None else ","
    _dump(value, path, indent, 0, item_separator, pieces)
    return pieces


def _dump(value: Any, path: str, indent, level, separator, pieces: list[tuple[str, str]]) -> None:
    if isinstance(value, dict) and value:
        items: list[tuple[str, Any, str]] = [
            (json.dumps(_key(key), ensure_ascii=False) + ": ", item, f"{path}.{_key(key)}")
            for key, item in value.items()
        ]
        brackets = "{}"
    elif isinstance(value, list) and value:
        items = [("", item, f"{path}[{index}]") for index, item in enumerate(value)]
        brackets = "[]"
    else:
        pieces.append((json.dumps(value, ensure_ascii=False), path))
        return
    inner = "" if indent is None else "\n" + " " * (indent * (level + 1))
    outer = "" if indent is None else "\n" + " " * (indent * level)
    pieces.append((brackets[0] + inner, path))
    for index, (key_text, item, child) in enumerate(items):
        if index:
            pieces.append((separator + inner, path))
        if key_text:
            pieces.append((key_text, child))
        _dump(item, child, indent, level + 1, separator, pieces)
    pieces.append((outer + brackets[1], path))


def _key(key: Any) -> str:
    if isinstance(key, str):
        return key
    return json.dumps(key)  # True -> "true", 1 -> "1", as json.dumps writes non-string keys


class _Claims:
    """Disjoint character ranges already attributed, kept sorted."""

    def __init__(self, text: str):
        self.text = text
        self.starts: list[int] = []
        self.ranges: list[tuple[int, int, str]] = []

    def overlaps(self, start: int, end: int) -> int | None:
        """The end of a claimed range overlapping [start, end), or None."""
        index = bisect_right(self.starts, end - 1) - 1
        if index >= 0 and self.ranges[index][1] > start:
            return self.ranges[index][1]
        return None

    def find(self, needle: str, start: int) -> int:
        position = start
        while needle:
            hit = self.text.find(needle, position)
            if hit < 0:
                return -1
            if self.overlaps(hit, hit + len(needle)) is None:
                return hit
            position = hit + 1
        return -1

    def claim(self, start: int, pieces: list[tuple[str, str]]) -> int:
        """Attribute consecutive pieces from `start`; returns the end."""
        for text, path in pieces:
            if text:
                index = bisect_right(self.starts, start)
                self.starts.insert(index, start)
                self.ranges.insert(index, (start, start + len(text), path))
            start += len(text)
        return start


def _string_forms(value: str) -> Iterator[str]:
    yield value
    if value.strip() and value.strip() != value:
        yield value.strip()
    escaped = json.dumps(value, ensure_ascii=False)[1:-1]
    if escaped != value:
        yield escaped


def _locate(value: Any, path: str, claims: _Claims, cursor: int, fallback: bool) -> int | None:
    """Claim `value` at its first free occurrence at or after `cursor`; returns the end."""
    if isinstance(value, str):
        if fallback and len(value.strip()) < MIN_FALLBACK_CHARS:
            return None
        for form in _string_forms(value):
            hit = claims.find(form, cursor)
            if hit >= 0:
                return claims.claim(hit, [(form, path)])
        return None
    if not isinstance(value, dict | list) or not value:
        return None
    for indent in DUMP_INDENTS:
        pieces = json_pieces(value, path, indent)
        hit = claims.find("".join(text for text, _ in pieces), cursor)
        if hit >= 0:
            return claims.claim(hit, pieces)
    end = None
    children = value.items() if isinstance(value, dict) else enumerate(value)
    for key, item in children:
        child = f"{path}.{key}" if isinstance(value, dict) else f"{path}[{key}]"
        found = _locate(item, child, claims, cursor if end is None else end, True)
        end = found if found is not None else end
    return end


def _locate_tool(tool: Any, path: str, claims: _Claims) -> None:
    function = tool.get("function") if isinstance(tool, dict) else None
    candidates = [(tool, path)]
    if isinstance(function, dict):
        candidates.append((function, f"{path}.function"))
        if isinstance(function.get("parameters"), dict):
            candidates.append((function["parameters"], f"{path}.function.parameters"))
    for value, value_path in candidates:
        for indent in DUMP_INDENTS:
            pieces = json_pieces(value, value_path, indent)
            hit = claims.find("".join(text for text, _ in pieces), 0)
            if hit >= 0:
                claims.claim(hit, pieces)
                if value_path.endswith(".parameters"):
                    _locate_function_text(function, f"{path}.function", claims)
                return
    if isinstance(function, dict):
        _locate_function_text(function, f"{path}.function", claims)
        if isinstance(function.get("parameters"), dict):
            _locate(function["parameters"], f"{path}.function.parameters", claims, 0, True)


def _locate_function_text(function: dict[str, Any], path: str, claims: _Claims) -> None:
    for key in ("name", "description"):
        if isinstance(function.get(key), str):
            _locate(function[key], f"{path}.{key}", claims, 0, True)


def _message_fields(message: dict[str, Any], path: str) -> Iterator[tuple[Any, str]]:
    for key in ("content", *TEMPLATE_REASONING_KEYS):
        if isinstance(message.get(key), str) and message[key]:
            yield message[key], f"{path}.{key}"
            if key != "content":
                break  # the reasoning aliases hold the same text
    for index, call in enumerate(message.get("tool_calls") or []):
        if not isinstance(call, dict):
            continue
        function = call.get("function") if isinstance(call.get("function"), dict) else call
        prefix = f"{path}.tool_calls[{index}]" + (".function" if function is not call else "")
        if isinstance(function.get("name"), str):
            yield function["name"], f"{prefix}.name"
        if function.get("arguments") not in (None, "", {}):
            yield function["arguments"], f"{prefix}.arguments"


def locate_spans(
    text: str,
    request: Request,
    render_messages: Callable[[list[dict[str, Any]]], str] | None = None,
) -> list[Span]:
    """Sorted, disjoint spans of `text` mapped to the request's JSON paths.

    With `render_messages` (the template applied to other messages, same tools and options),
    message text is first placed exactly by a fenced re-render (`marked_render`).
    """
    claims = _Claims(text)
    exact_ends: dict[str, int] = {}
    fenced: set[str] = set()
    exact = None
    if render_messages is not None:
        exact = exact_message_ranges(text, request.messages, render_messages)
    if exact is not None:
        ranges, fenced = exact
        for start, end, path in ranges:
            claims.claim(start, [(text[start:end], path)])
            exact_ends[path] = max(exact_ends.get(path, 0), end)
    for index, tool in enumerate(request.tools):
        _locate_tool(tool, f"tools[{index}]", claims)
    cursor = 0
    for index, message in enumerate(request.messages):
        message_end = cursor
        for value, path in _message_fields(message, f"messages[{index}]"):
            if path in fenced:  # placed exactly, or not rendered verbatim at all
                message_end = max(message_end, exact_ends.get(path, 0))
                continue
            end = _locate(value, path, claims, cursor, False)
            message_end = max(message_end, end or 0)
        cursor = message_end
    spans: list[Span] = []
    for start, end, path in claims.ranges:
        if spans and spans[-1].normalized == path and spans[-1].end == start:
            spans[-1] = Span(spans[-1].start, end, spans[-1].path, path)
        else:
            spans.append(Span(start, end, request.source_path(path), path))
    return spans


class DeferredSpans:
    """The spans of a rendered text, located only when first asked for.

    Locating costs a fenced re-render and a search, most of the cost of rendering, and lint
    needs positions only where it reports something.
    """

    def __init__(
        self,
        text: str,
        request: Request,
        render_messages: Callable[[list[dict[str, Any]]], str] | None = None,
        spans: list[Span] | None = None,
    ):
        self.text = text
        self.request = request
        self.render_messages = render_messages
        self._spans = spans

    @classmethod
    def known(cls, text: str, request: Request, spans: list[Span]) -> DeferredSpans:
        return cls(text, request, spans=spans)

    def spans(self) -> list[Span]:
        if self._spans is None:
            self._spans = locate_spans(self.text, self.request, self.render_messages)
        return self._spans

    def message_start(self, index: int) -> int | None:
        """The first character that came from messages[index:] (None: nothing did).

        Without tool calls in those messages their spans are exactly the fenced strings, so
        one fenced render answers before the spans are located."""
        later = self.request.messages[index:]
        fenced_only = later and not any(message.get("tool_calls") for message in later)
        if self._spans is None and self.render_messages is not None and fenced_only:
            exact = exact_message_ranges(self.text, self.request.messages, self.render_messages)
            if exact is not None:
                return min(
                    (s for s, _, path in exact[0] if message_index(path) >= index), default=None
                )
        starts = [span.start for span in self.spans() if message_index(span.normalized) >= index]
        return min(starts, default=None)


def message_index(normalized_path: str) -> int:
    """The message a normalized path belongs to (`messages[3].content` -> 3); -1 if none."""
    if not normalized_path.startswith("messages["):
        return -1
    return int(normalized_path[9 : normalized_path.index("]")])
