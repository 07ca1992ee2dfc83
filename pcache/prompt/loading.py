"""Read JSON and JSONL inputs safely: size limits, binary files, line:column errors, streaming."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from pcache.errors import InputError

MAX_DOCUMENT_BYTES = 256 * 1024 * 1024
SNIFF_BYTES = 8192


@dataclass(frozen=True, slots=True)
class Document:
    """One parsed JSON value and where it came from (line is 1-based for JSONL lines, else None)."""

    source: str
    line: int | None
    value: Any


def display_name(path: str | os.PathLike[str]) -> str:
    return "<stdin>" if str(path) == "-" else str(path)


def _check_regular_file(path: Path, source: str, max_bytes: int) -> int:
    try:
        info = path.stat()
    except FileNotFoundError:
        raise InputError(source, "no such file") from None
    except PermissionError:
        raise InputError(source, "permission denied") from None
    except OSError as error:
        raise InputError(source, error.strerror or "cannot read file") from None
    if path.is_dir():
        raise InputError(source, "is a directory, expected a JSON or JSONL file")
    if info.st_size > max_bytes:
        raise InputError(
            source,
            f"file is too large ({info.st_size / 2**20:.0f} MiB > {max_bytes / 2**20:.0f} MiB);"
            " split it or use a .jsonl file",
        )
    return info.st_size


def read_bytes(path: str | os.PathLike[str], max_bytes: int = MAX_DOCUMENT_BYTES) -> bytes:
    """Read a whole input file ('-' is stdin), refusing binary, empty and oversized input."""
    source = display_name(path)
    if str(path) == "-":
        data = sys.stdin.buffer.read(max_bytes + 1)
        if len(data) > max_bytes:
            raise InputError(source, f"input is larger than {max_bytes / 2**20:.0f} MiB")
    else:
        _check_regular_file(Path(path), source, max_bytes)
        try:
            data = Path(path).read_bytes()
        except OSError as error:
            raise InputError(source, error.strerror or "cannot read file") from None
    _check_text(data[:SNIFF_BYTES], source)
    if not data.strip():
        raise InputError(source, "file is empty, expected a JSON request")
    return data


def _check_text(head: bytes, source: str) -> None:
    if b"\x00" in head:
        raise InputError(source, "binary file, expected JSON text")


def parse_json(data: bytes, source: str, line: int | None = None) -> Any:
    """Parse one JSON document; errors name source:line:column."""
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError as error:
        message = str(error.msg)
        if line is not None:  # a JSONL line: the line is the file's, the column the line's
            raise InputError(source, f"invalid JSON: {message}", line, error.colno) from None
        raise InputError(source, f"invalid JSON: {message}", error.lineno, error.colno) from None


def is_jsonl_name(path: str | os.PathLike[str]) -> bool:
    return str(path).endswith((".jsonl", ".ndjson", ".jsonl.txt"))


def iter_documents(
    path: str | os.PathLike[str], *, skip_errors: bool = False
) -> Iterator[Document | InputError]:
    """Stream documents; with skip_errors, a bad JSONL line yields its InputError (not raised).

    A `.json` file holds one document, unless it does not parse as one and every non-blank line
    parses on its own (a JSONL log saved as .json).
    """
    source = display_name(path)
    if str(path) != "-" and is_jsonl_name(path):
        yield from _iter_jsonl_file(Path(path), source, skip_errors)
        return
    data = read_bytes(path)
    try:
        yield Document(source, None, orjson.loads(data))
        return
    except orjson.JSONDecodeError as error:
        first_error = error
    lines = data.splitlines()
    if len([raw for raw in lines if raw.strip()]) > 1 and lines[0].strip().startswith(b"{"):
        try:
            parsed = [
                (number, orjson.loads(raw)) for number, raw in enumerate(lines, 1) if raw.strip()
            ]
        except orjson.JSONDecodeError:
            parsed = None
        if parsed is not None:
            for number, value in parsed:
                yield Document(source, number, value)
            return
    raise InputError(
        source, f"invalid JSON: {first_error.msg}", first_error.lineno, first_error.colno
    )


def _iter_jsonl_file(path: Path, source: str, skip_errors: bool) -> Iterator[Document | InputError]:
    for entry in iter_json_lines(path, skip_errors=skip_errors):
        if isinstance(entry, InputError):
            yield entry
        else:
            yield Document(source, entry[0], entry[1])


def iter_json_lines(
    path: str | os.PathLike[str], *, skip_errors: bool = False
) -> Iterator[tuple[int, Any] | InputError]:
    """(line number, value) for each non-blank line of a JSONL file, at orjson's speed.

    The streaming core of `iter_documents` for .jsonl files (no `Document` per line, for
    traces of millions of lines); with skip_errors, a bad line yields its InputError.
    """
    source = display_name(path)
    file = Path(path)
    _check_regular_file(file, source, max_bytes=2**62)
    try:
        handle = file.open("rb")
    except OSError as error:
        raise InputError(source, error.strerror or "cannot read file") from None
    loads, decode_error = orjson.loads, orjson.JSONDecodeError
    with handle:
        head = handle.read(SNIFF_BYTES)
        _check_text(head, source)
        handle.seek(0)
        seen_any = False
        for number, raw in enumerate(handle, 1):
            try:
                value = loads(raw)
            except decode_error as error:
                if not raw.strip():
                    continue
                seen_any = True
                failure = InputError(source, f"invalid JSON: {error.msg}", number, error.colno)
                if not skip_errors:
                    raise failure from None
                yield failure
                continue
            seen_any = True
            yield number, value
        if not seen_any:
            raise InputError(source, "file is empty, expected JSON lines")


def iter_values(
    path: str | os.PathLike[str], *, skip_errors: bool = False
) -> Iterator[tuple[int | None, Any] | InputError]:
    """`iter_documents` as (line, value) pairs; `iter_json_lines` itself for .jsonl files."""
    if str(path) != "-" and is_jsonl_name(path):
        return iter_json_lines(path, skip_errors=skip_errors)
    return (
        item if isinstance(item, InputError) else (item.line, item.value)
        for item in iter_documents(path, skip_errors=skip_errors)
    )
