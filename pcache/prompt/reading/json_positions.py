"""Where each value of a JSON text starts: JSON paths to line:column, for pointing at findings.

orjson parses without positions, so the text is scanned once more, only for files that have
findings. The scan is iterative (no recursion limit), follows JSON's grammar for strings
(escapes, surrogate pairs, any unicode) and counts columns in characters, as `json` errors do.
"""

from __future__ import annotations

import json
import re
from bisect import bisect_right

_WHITESPACE = re.compile(r"[ \t\r\n]*")
_STRING_STOP = re.compile(r'["\\]')
_SCALAR_END = re.compile(r"[,\]} \t\r\n]|$")
_STEP = re.compile(r"\.?([^.\[\]]+)|\[(\d+)\]")

Path = tuple[str | int, ...]


class JsonPositions:
    """Offsets of every value of one JSON text, by path (keys and list indexes)."""

    def __init__(self, text: str):
        self.text = text
        self.offsets: dict[Path, int] = _scan(text)
        self.line_starts = [0] + [m.end() for m in re.finditer("\n", text)]

    def offset(self, path: Path) -> int:
        """Offset of the value at `path`, or of its nearest enclosing value that exists."""
        for cut in range(len(path), -1, -1):
            found = self.offsets.get(path[:cut])
            if found is not None:
                return found
        return 0

    def line_column(self, offset: int) -> tuple[int, int]:
        """1-based line and column (in characters) of a character offset."""
        line = bisect_right(self.line_starts, offset)
        return line, offset - self.line_starts[line - 1] + 1

    def locate(self, json_path: str) -> tuple[int, int]:
        """Line and column of the value at a path such as `messages[2].content[0].text`."""
        return self.line_column(self.offset(parse_path(json_path)))

    def check_integrity(self) -> None:
        for path, offset in self.offsets.items():
            assert 0 <= offset < len(self.text), path
            assert self.text[offset] in '{["-0123456789tfn', (path, self.text[offset])


def parse_path(json_path: str) -> Path:
    return tuple(int(index) if index else name for name, index in _STEP.findall(json_path))


def _skip(text: str, index: int) -> int:
    return _WHITESPACE.match(text, index).end()


def _string(text: str, index: int) -> tuple[str, int]:
    """The decoded string starting at the quote at `index`, and the offset after it."""
    assert text[index] == '"', index
    cursor, escaped = index + 1, False
    while True:
        stop = _STRING_STOP.search(text, cursor)
        if stop is None:
            raise ValueError(f"unterminated string at offset {index}")
        if stop.group() == "\\":
            escaped, cursor = True, stop.end() + 1
            continue
        end = stop.end()
        raw = text[index:end]
        return (json.loads(raw) if escaped else raw[1:-1]), end


def _scan(text: str) -> dict[Path, int]:
    offsets: dict[Path, int] = {}
    stack: list[list] = []  # [kind, path of the container, index of the current item]
    index = _skip(text, 0)
    path: Path = ()
    while True:
        offsets[path] = index
        char = text[index]
        if char in "{[":
            index = _skip(text, index + 1)
            if text[index] in "}]":
                index += 1
            elif char == "{":
                key, index = _string(text, index)
                index = _skip(text, _skip(text, index) + 1)  # past the colon
                stack.append(["object", path, 0])
                path = (*path, key)
                continue
            else:
                stack.append(["array", path, 0])
                path = (*path, 0)
                continue
        elif char == '"':
            _, index = _string(text, index)
        else:
            index = _SCALAR_END.search(text, index + 1).start()
        next_path = None
        while stack and next_path is None:
            index = _skip(text, index)
            kind, parent, item = stack[-1]
            if text[index] == ",":
                index = _skip(text, index + 1)
                if kind == "object":
                    key, index = _string(text, index)
                    index = _skip(text, _skip(text, index) + 1)
                    next_path = (*parent, key)
                else:
                    stack[-1][2] = item + 1
                    next_path = (*parent, item + 1)
            else:
                index += 1  # the closing bracket
                stack.pop()
        if next_path is None:
            return offsets
        path = next_path
