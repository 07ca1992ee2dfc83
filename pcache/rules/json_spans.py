"""A JSON text as a tree of spans, for edits that keep every character they do not move.

`parse_spans(text)` gives each value its `[start, end)` in the text and, for objects and
arrays, their members and the text between them (brackets, commas, whitespace, line endings).
`render(node)` writes the text back from the tree: unchanged, it is the input character for
character; with members reordered, only their order changes, never an escape, a number's
spelling, the indentation or a line ending.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

_WHITESPACE = re.compile(r"[ \t\r\n]*")
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"', re.DOTALL)
_SCALAR = re.compile(r"-?[0-9][0-9.eE+-]*|true|false|null")
MAX_DEPTH = 200


@dataclass(slots=True)
class Node:
    """One value: `text` for a scalar; `members` (key, value) of an object or `items` of an
    array with `gaps`, the text around and between them (one more gap than members)."""

    kind: str  # "object", "array" or "scalar"
    text: str = ""
    keys: list[str] = field(default_factory=list)
    key_texts: list[str] = field(default_factory=list)
    separators: list[str] = field(default_factory=list)
    children: list[Node] = field(default_factory=list)
    gaps: list[str] = field(default_factory=list)

    def member(self, key: str) -> Node | None:
        """The value of `key` (the last one, as JSON parsers keep), or None."""
        for index in range(len(self.keys) - 1, -1, -1):
            if self.keys[index] == key:
                return self.children[index]
        return None


def parse_spans(text: str) -> Node:
    """The span tree of a JSON text (which must already parse as JSON)."""
    start = _skip(text, 0)
    node, end = _value(text, start, 0)
    if text[end:].strip(" \t\r\n"):
        raise ValueError("text after the JSON value")
    # the whole text: the value between the whitespace before and after it
    return Node("array", gaps=[text[:start], text[end:]], children=[node], separators=[""])


def root_value(root: Node) -> Node:
    """The JSON value of a `parse_spans` tree."""
    return root.children[0]


def _skip(text: str, index: int) -> int:
    return _WHITESPACE.match(text, index).end()


def _value(text: str, index: int, depth: int) -> tuple[Node, int]:
    if depth > MAX_DEPTH:
        raise ValueError("nested too deeply to edit")
    char = text[index : index + 1]
    if char == "{":
        return _container(text, index, depth, "object", "}")
    if char == "[":
        return _container(text, index, depth, "array", "]")
    match = _STRING.match(text, index) if char == '"' else _SCALAR.match(text, index)
    if match is None:
        raise ValueError(f"unexpected character at offset {index}")
    return Node("scalar", text=match.group()), match.end()


def _container(text: str, start: int, depth: int, kind: str, close: str) -> tuple[Node, int]:
    node = Node(kind)
    gap_start = start
    index = _skip(text, start + 1)
    if text[index : index + 1] == close:
        node.gaps.append(text[start : index + 1])
        return node, index + 1
    while True:
        node.gaps.append(text[gap_start:index])
        if kind == "object":
            match = _STRING.match(text, index)
            if match is None:
                raise ValueError(f"expected a key at offset {index}")
            colon = _skip(text, match.end())
            if text[colon : colon + 1] != ":":
                raise ValueError(f"expected ':' at offset {colon}")
            value_start = _skip(text, colon + 1)
            node.key_texts.append(match.group())
            node.keys.append(json.loads(match.group()))
            node.separators.append(text[match.end() : value_start])
            index = value_start
        else:
            node.separators.append("")
        child, index = _value(text, index, depth + 1)
        node.children.append(child)
        gap_start = index
        index = _skip(text, index)
        char = text[index : index + 1]
        if char == ",":
            index = _skip(text, index + 1)
            continue
        if char == close:
            node.gaps.append(text[gap_start : index + 1])
            return node, index + 1
        raise ValueError(f"expected ',' or {close!r} at offset {index}")


def render(node: Node) -> str:
    """The text of `node`: its own spans, children in their current order."""
    if node.kind == "scalar":
        return node.text
    if not node.children:
        return node.gaps[0]
    parts = [node.gaps[0]]
    for index, child in enumerate(node.children):
        if node.kind == "object":
            parts.append(node.key_texts[index] + node.separators[index])
        parts.append(render(child))
        parts.append(node.gaps[index + 1])
    return "".join(parts)


def reorder(node: Node, order: list[int]) -> None:
    """Put the members (or items) of `node` in `order` (indexes into the current ones); the
    text between members stays where it was, so separators and indentation are kept."""
    assert sorted(order) == list(range(len(node.children))), order
    for name in ("children", "keys", "key_texts", "separators"):
        values = getattr(node, name)
        if values:
            setattr(node, name, [values[index] for index in order])


def sort_keys(node: Node) -> None:
    """Sort every object's keys, recursively (as `json.dumps(sort_keys=True)` orders them)."""
    if node.kind == "object" and node.children:
        reorder(node, sorted(range(len(node.keys)), key=lambda index: node.keys[index]))
    for child in node.children:
        sort_keys(child)
