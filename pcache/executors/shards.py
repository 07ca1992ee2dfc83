"""A sharded input: JSONL files cut at line boundaries, each shard read on its own.

`shards_of(paths)` lists the shards of files and directories (each file of a directory, in
sorted order, as `pcache lint` finds them); a JSONL file of more than `min_bytes` is cut into
pieces of about equal size, each starting at the beginning of a line, that know the number of
their first line. `read_shard` yields what reading the whole file yields for those lines: the
same (line, value) pairs, the same errors (`file:line:column`), blank lines skipped. Any other
file (a JSON document, a table, stdin) is one shard read whole.
"""

from __future__ import annotations

import io
import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import orjson

MIN_SHARD_BYTES = 4 << 20
"""A JSONL file is cut into shards of at least this many bytes (the `PCACHE_SHARD_BYTES`
environment variable sets another size)."""
MAX_SHARDS_PER_FILE = 256
_COUNT_BLOCK = 1 << 20


@dataclass(frozen=True, slots=True)
class Shard:
    """Bytes `start` to `end` of `path` (whole file when `end` is None), whose first line is
    line `first_line` of the file."""

    path: str
    start: int = 0
    end: int | None = None
    first_line: int = 1

    @property
    def whole(self) -> bool:
        return self.end is None


def shard_bytes() -> int:
    """The smallest shard: `PCACHE_SHARD_BYTES` when it is a positive integer, else
    `MIN_SHARD_BYTES`."""
    text = os.environ.get("PCACHE_SHARD_BYTES", "")
    return int(text) if text.isdigit() and int(text) > 0 else MIN_SHARD_BYTES


def shards_of_file(
    path: str, min_bytes: int | None = None, max_shards: int = MAX_SHARDS_PER_FILE
) -> list[Shard]:
    """The shards of one file: line-aligned byte ranges of a JSONL file, else the file."""
    from pcache.prompt.reading.loading import BOM, is_jsonl_name

    min_bytes = min_bytes or shard_bytes()

    if path == "-" or not is_jsonl_name(path) or not os.path.isfile(path):
        return [Shard(path)]
    size = os.path.getsize(path)
    count = max(1, min(max_shards, size // max(min_bytes, 1)))
    if count == 1:
        return [Shard(path)]
    with open(path, "rb") as handle:
        head = handle.read(len(BOM))
        begin = len(BOM) if head == BOM else 0
        starts = [begin]
        for number in range(1, count):
            handle.seek(max(size * number // count - 1, starts[-1]))
            handle.readline()  # to the start of the next line
            position = handle.tell()
            if starts[-1] < position < size:
                starts.append(position)
        shards = []
        line = 1
        for start, end in zip(starts, [*starts[1:], size], strict=True):
            shards.append(Shard(path, start, end, line))
            line += _count_newlines(handle, start, end)
    return shards


def _count_newlines(handle: Any, start: int, end: int) -> int:
    handle.seek(start)
    count = 0
    remaining = end - start
    while remaining > 0:
        block = handle.read(min(_COUNT_BLOCK, remaining))
        if not block:
            break
        count += block.count(b"\n")
        remaining -= len(block)
    return count


class ShardCutsChain(Exception):
    """A shard holds a Responses request continuing an earlier response (`previous_response_id`)
    that may lie in an earlier shard: its file must be read whole."""


def read_shard(shard: Shard, skip_errors: bool = True) -> Iterator[tuple[int | None, Any] | Any]:
    """What `pcache.prompt.reading.loading.iter_values` yields for the shard's lines: (line, value)
    for each non-blank line, expanded in the context of the log (`expand_values`), and an
    `InputError` for each line that is not JSON (raised instead unless `skip_errors`). A shard
    after the first of its file raises `ShardCutsChain` at a request that continues another."""
    from pcache.prompt.reading.expand import expand_values
    from pcache.prompt.reading.loading import iter_values

    if shard.whole:
        yield from iter_values(shard.path, skip_errors=skip_errors)
        return
    entries = _shard_lines(shard, skip_errors)
    if shard.first_line > 1:
        entries = _refusing_chains(entries)
    yield from expand_values(entries)


def _refusing_chains(entries: Iterator) -> Iterator:
    for entry in entries:
        if type(entry) is tuple and type(entry[1]) is dict:
            body = entry[1].get("body", entry[1])
            if type(body) is dict and isinstance(body.get("previous_response_id"), str):
                raise ShardCutsChain(entry[0])
        yield entry


def _shard_lines(shard: Shard, skip_errors: bool) -> Iterator:
    from pcache.prompt.reading.document import json_error
    from pcache.prompt.reading.loading import display_name

    source = display_name(shard.path)
    assert shard.end is not None
    with open(shard.path, "rb") as handle:
        handle.seek(shard.start)
        data = handle.read(shard.end - shard.start)
    loads, decode_error = orjson.loads, orjson.JSONDecodeError
    for number, raw in enumerate(io.BytesIO(data), shard.first_line):
        try:
            value = loads(raw)
        except decode_error as error:
            if not raw.strip():
                continue
            failure = json_error(raw, error, source, number)
            if not skip_errors:
                raise failure from None
            yield failure
            continue
        yield number, value
