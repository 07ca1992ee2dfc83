"""`Document`: one parsed JSON value and where it came from; the error of a failed parse."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson

from pcache.errors import InputError, NestingError
from pcache.files import line_and_column
from pcache.prompt.shapes.fields import MAX_NESTING


@dataclass(frozen=True, slots=True)
class Document:
    """One parsed JSON value and where it came from (line is 1-based for JSONL lines, else None)."""

    source: str
    line: int | None
    value: Any
    raw: bytes | None = None
    """The JSON text of this document (of its line in a JSONL file), to locate errors in."""
    path: str = ""
    """The JSON path of `value` inside `raw` (a span inside an OTLP export); "" for the whole."""

    def locate(self, failure: InputError) -> InputError:
        """Give an error about a value of this document (its `json_path`) a line and column."""
        if self.raw is None or failure.json_path is None or failure.column is not None:
            return failure
        from pcache.prompt.reading.json_positions import JsonPositions

        try:
            line, column = JsonPositions(self.raw.decode("utf-8")).locate(failure.json_path)
        except (UnicodeDecodeError, ValueError, IndexError):
            return failure
        if self.line is None:
            failure.line = line
        elif line != 1:  # a line of a JSONL file holds one JSON line
            return failure
        failure.column = column
        return failure


def json_error(
    data: bytes, error: orjson.JSONDecodeError, source: str, line: int | None = None
) -> InputError:
    """The InputError of a failed parse, at the right place: orjson reports invalid UTF-8 at
    1:1, so that place is found in the bytes; a JSONL line gives the file's line number."""
    message, found_line, column = f"invalid JSON: {error.msg}", error.lineno, error.colno
    if "depth limit" in error.msg:  # orjson's own limit (1024 levels), past pcache's
        line = found_line if line is None else line
        return NestingError(source, f"nests more than {MAX_NESTING} levels", line, column)
    if "UTF-8" in error.msg and "BOM" not in error.msg:
        try:
            data.decode("utf-8")
        except UnicodeDecodeError as failure:
            found_line, column = line_and_column(data, failure.start)
            message = "invalid UTF-8 (expected UTF-8 text)"
    return InputError(source, message, found_line if line is None else line, column)
