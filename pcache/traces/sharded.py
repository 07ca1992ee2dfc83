"""Request traces read shard by shard (`--executor`, a directory of logs): each shard's
requests rendered and tokenized where the executor runs it, the records put back in order.

A shard yields exactly the records, skipped lines and errors that reading its lines within the
whole file yields (`pcache.executors.shards`); the records are then numbered in input order
and sorted by timestamp (stable) as `read_trace` does, so the trace is the one `read_trace`
reads from the same lines. A directory is its .jsonl/.ndjson files in sorted order, read as one
log. A hash-id trace (Mooncake, Bailian) has nothing to render: it is read as it always is.
"""

from __future__ import annotations

import itertools
import os
from dataclasses import dataclass, field
from typing import Any

from pcache.errors import InputError, OptionError
from pcache.executors.shards import Shard, ShardCutsChain, read_shard, shards_of_file
from pcache.traces.readers import (
    FORMATS,
    no_valid_records,
    read_request_records,
    read_trace,
)
from pcache.traces.record import Trace, TraceRecord

TRACE_SUFFIXES = (".jsonl", ".ndjson")


@dataclass(slots=True)
class ShardRecords:
    """What one shard of a request trace holds: records (numbered within the shard), the
    reason of each skipped line, the errors `--strict` would raise, in order."""

    records: list[TraceRecord] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    failures: list[tuple[str, str, int | None, int | None]] = field(default_factory=list)
    has_timestamps: bool = False
    cuts_chain: bool = False
    """The shard continues a conversation of an earlier shard: its file is read whole."""


def read_request_shard(shard: Shard, settings: Any) -> ShardRecords:
    """Render and tokenize one shard's requests (the task an executor runs)."""
    from pcache.prompt.reading.loading import display_name

    trace = Trace(source=display_name(shard.path), format="requests", block_size=None)
    failures: list[InputError] = []
    try:
        read_request_records(read_shard(shard), trace, False, settings, failures)
    except ShardCutsChain:
        return ShardRecords(cuts_chain=True)
    except InputError as failure:  # the file itself (empty, binary, missing)
        return ShardRecords(failures=[_fields(failure)], skipped=[str(failure)])
    return ShardRecords(
        trace.records,
        trace.skipped,
        [_fields(failure) for failure in failures],
        trace.has_timestamps,
    )


def _fields(failure: InputError) -> tuple[str, str, int | None, int | None]:
    return failure.source, failure.message, failure.line, failure.column


def trace_files(path: str) -> list[str]:
    """The logs a trace path names: the file, or a directory's logs in sorted order."""
    if not os.path.isdir(path):
        return [path]
    found = sorted(
        str(child)
        for child in _walk(path)
        if child.lower().endswith(TRACE_SUFFIXES) and os.path.isfile(child)
    )
    if not found:
        raise InputError(path, f"no request logs ({', '.join(TRACE_SUFFIXES)}) in this directory")
    return found


def _walk(path: str):
    for root, directories, files in os.walk(path):
        directories[:] = sorted(d for d in directories if not d.startswith("."))
        yield from (os.path.join(root, name) for name in files if not name.startswith("."))


def read_trace_sharded(
    path: str | os.PathLike[str],
    executor: Any,
    *,
    trace_format: str = "auto",
    strict: bool = False,
    settings: Any = None,
    block_size: int | None = None,
) -> Trace:
    """`read_trace` of a file or a directory of logs, its requests rendered by `executor`."""
    from pcache.pipeline import Settings
    from pcache.prompt.reading.loading import display_name

    if trace_format not in FORMATS:
        raise OptionError("trace_format", f"must be one of {', '.join(FORMATS)}")
    path = os.fspath(path)
    files = trace_files(path)
    detected = _format_of(files[0], trace_format)
    if detected in ("mooncake", "bailian"):
        if len(files) > 1:
            raise InputError(path, "a directory trace holds request logs, not hash-id traces")
        return read_trace(files[0], trace_format=trace_format, strict=strict, block_size=block_size)
    settings = settings or Settings()
    if executor.distributed:
        shards = [shard for name in files for shard in shards_of_file(name)]
    else:
        shards = [Shard(name) for name in files]
    trace = Trace(source=display_name(path), format="requests", block_size=None)
    for part in _in_order(executor, shards, settings):
        if strict and part.failures:
            raise InputError(*part.failures[0])
        for record in part.records:
            record.index = len(trace.records)
            trace.records.append(record)
        trace.skipped += part.skipped
        trace.has_timestamps = trace.has_timestamps or part.has_timestamps
    if not trace.records:
        raise InputError(trace.source, no_valid_records(trace))
    stamps = [record.timestamp_ms for record in trace.records]
    if any(later < earlier for earlier, later in itertools.pairwise(stamps)):
        trace.records.sort(key=lambda record: record.timestamp_ms)
        trace.reordered = True
    return trace


def _in_order(executor: Any, shards: list[Shard], settings: Any):
    """Each shard's records in order; a file one of whose shards continues a conversation
    begun in another is read again whole, as one shard (its first stands for it)."""
    parts = list(executor.map(read_request_shard, shards, settings))
    redo = {shard.path for shard, part in zip(shards, parts, strict=True) if part.cuts_chain}
    if redo:
        whole = dict(
            zip(
                sorted(redo),
                executor.map(read_request_shard, [Shard(name) for name in sorted(redo)], settings),
                strict=True,
            )
        )
        empty = ShardRecords()
        parts = [
            (whole[shard.path] if shard.first_line == 1 else empty) if shard.path in redo else part
            for shard, part in zip(shards, parts, strict=True)
        ]
    return parts


def _format_of(path: str, trace_format: str) -> str:
    """The format of the file's first valid line, as `read_trace` detects it."""
    from pcache.prompt.reading.loading import iter_values
    from pcache.traces.readers import detect_format

    if trace_format != "auto":
        return trace_format
    for entry in iter_values(path, skip_errors=True):
        if not isinstance(entry, InputError):
            return detect_format(entry[1])
    return "requests"
