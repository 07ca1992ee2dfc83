"""Read JSON and JSONL inputs safely: size limits, binary files, line:column errors, streaming."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import orjson

from pcache.errors import InputError
from pcache.files import MAX_INPUT_BYTES, display_name, open_input, read_input
from pcache.prompt.reading.document import Document as Document
from pcache.prompt.reading.document import json_error as json_error
from pcache.prompt.reading.text_encoding import SNIFF_BYTES, check_text

MAX_DOCUMENT_BYTES = MAX_INPUT_BYTES
BOM = b"\xef\xbb\xbf"


def read_bytes(path: str | os.PathLike[str], max_bytes: int = MAX_DOCUMENT_BYTES) -> bytes:
    """Read a whole input file ('-' is stdin), refusing binary, empty and oversized input."""
    source = display_name(path)
    data = read_input(path, max_bytes=max_bytes, what="JSON or JSONL file")
    check_text(data[:SNIFF_BYTES], source)
    if not data.strip():
        raise InputError(source, "file is empty, expected a JSON request")
    return data


def parse_json(data: bytes, source: str, line: int | None = None) -> Any:
    """Parse one JSON document; errors name source:line:column."""
    try:
        return orjson.loads(data[3:] if data.startswith(BOM) else data)
    except orjson.JSONDecodeError as error:
        raise json_error(data, error, source, line) from None


def is_jsonl_name(path: str | os.PathLike[str]) -> bool:
    return str(path).endswith((".jsonl", ".ndjson", ".jsonl.txt"))


def iter_documents(
    path: str | os.PathLike[str], *, skip_errors: bool = False
) -> Iterator[Document | InputError]:
    """Stream documents; with skip_errors, a bad JSONL line yields its InputError (not raised).

    A `.json` file holds one document, unless it does not parse as one and every non-blank line
    parses on its own (a JSONL log saved as .json). A Parquet or CSV table (`table.parquet`,
    `table.csv#column`) yields the JSON of its request column row by row. Each document is
    seen in the context of its log (`pcache.prompt.reading.expand`: spans of OTLP exports, Responses
    chains).
    """
    from pcache.prompt.reading.expand import expand_documents

    return expand_documents(_iter_documents(path, skip_errors))


def _iter_documents(
    path: str | os.PathLike[str], skip_errors: bool
) -> Iterator[Document | InputError]:
    from pcache.prompt.reading import tables

    if tables.is_table(path):
        yield from tables.iter_table_documents(path, skip_errors=skip_errors)
        return
    source = display_name(path)
    if str(path) != "-" and is_jsonl_name(path):
        yield from _iter_jsonl_file(path, source, skip_errors)
        return
    data = read_bytes(path)
    body = data[3:] if data.startswith(BOM) else data
    try:
        yield Document(source, None, orjson.loads(body), body)
        return
    except orjson.JSONDecodeError as error:
        first_error = error
    lines = body.split(b"\n")  # as JSONL lines end: "\r" alone is JSON whitespace
    if len([raw for raw in lines if raw.strip()]) > 1 and lines[0].strip().startswith(b"{"):
        try:
            parsed = [
                (number, orjson.loads(raw), raw)
                for number, raw in enumerate(lines, 1)
                if raw.strip()
            ]
        except orjson.JSONDecodeError:
            parsed = None
        if parsed is not None:
            for number, value, raw in parsed:
                yield Document(source, number, value, raw)
            return
    raise json_error(body, first_error, source)


def _iter_jsonl_file(
    path: str | os.PathLike[str], source: str, skip_errors: bool
) -> Iterator[Document | InputError]:
    for entry in _json_lines(path, skip_errors, keep_raw=True):
        if isinstance(entry, InputError):
            yield entry
        else:
            yield Document(source, *entry)


def iter_json_lines(
    path: str | os.PathLike[str], *, skip_errors: bool = False
) -> Iterator[tuple[int, Any] | InputError]:
    """(line number, value) for each non-blank line of a JSONL file, at orjson's speed.

    The streaming core of `iter_documents` for .jsonl files (no `Document` per line, for
    traces of millions of lines); with skip_errors, a bad line yields its InputError.
    """
    return _json_lines(path, skip_errors, keep_raw=False)


def _json_lines(path, skip_errors: bool, keep_raw: bool) -> Iterator[tuple | InputError]:
    source = display_name(path)
    with open_input(path, max_bytes=None, what="JSONL file") as (handle, size):
        head = handle.read(SNIFF_BYTES)
        check_text(head, source)
        handle.seek(0)
        if head.startswith(BOM):
            handle.seek(len(BOM))
        long_lines = size is None or size > MAX_DOCUMENT_BYTES
        lines = _bounded_lines(handle, source) if long_lines else handle
        yield from _parse_lines(lines, source, skip_errors, keep_raw)


def _bounded_lines(handle, source: str) -> Iterator[bytes]:
    """The lines of a file too large to hold one line of any length in memory."""
    number = 0
    while raw := handle.readline(MAX_DOCUMENT_BYTES + 1):
        number += 1
        if len(raw) > MAX_DOCUMENT_BYTES:
            raise InputError(source, f"line longer than {MAX_DOCUMENT_BYTES // 2**20} MiB", number)
        yield raw


def _parse_lines(
    lines, source: str, skip_errors: bool, keep_raw: bool
) -> Iterator[tuple | InputError]:
    loads, decode_error = orjson.loads, orjson.JSONDecodeError
    seen_any = False
    for number, raw in enumerate(lines, 1):
        try:
            value = loads(raw)
        except decode_error as error:
            if not raw.strip():
                continue
            seen_any = True
            failure = json_error(raw, error, source, number)
            if not skip_errors:
                raise failure from None
            yield failure
            continue
        seen_any = True
        yield (number, value, raw) if keep_raw else (number, value)
    if not seen_any:
        raise InputError(source, "file is empty, expected JSON lines")


def iter_values(
    path: str | os.PathLike[str], *, skip_errors: bool = False
) -> Iterator[tuple[int | None, Any] | InputError]:
    """`iter_documents` as (line, value) pairs; `iter_json_lines` (seen in the context of
    the log) for .jsonl files."""
    if str(path) != "-" and is_jsonl_name(path):
        from pcache.prompt.reading.expand import expand_values

        return expand_values(iter_json_lines(path, skip_errors=skip_errors))
    return (
        item if isinstance(item, InputError) else (item.line, item.value)
        for item in iter_documents(path, skip_errors=skip_errors)
    )
