"""Read replay traces, auto-detecting the format from the first valid line.

Formats:
- `mooncake`: `{"timestamp": ms, "input_length", "output_length", "hash_ids": [...]}`,
  512-token blocks (a `block_size` key overrides it; pcache's synthetic hash-id traces set it);
- `bailian`: Alibaba Bailian usage traces (`chat_id`, `parent_chat_id`, `turn`, `timestamp`
  in seconds, `hash_ids` of 16-token blocks);
- `requests`: any request body pcache reads (OpenAI, Anthropic, Batch API lines, `prompt`,
  `token_ids`) with optional `timestamp` (ms or ISO 8601), `session_id`, `output_length` and
  observed `usage`; prompts are rendered and tokenized with the real tokenizer.

A malformed line is skipped and counted, or fails the run with `strict`. Records out of
timestamp order are sorted (stable) and `Trace.reordered` is set.
"""

from __future__ import annotations

import itertools
import math
import os
from array import array
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from pcache.errors import InputError, OptionError
from pcache.prompt.reading.loading import display_name, iter_values
from pcache.prompt.shapes.fields import json_kind
from pcache.traces.record import Trace, TraceRecord

FORMATS = ("auto", "mooncake", "bailian", "requests")
MOONCAKE_BLOCK_SIZE = 512
BAILIAN_BLOCK_SIZE = 16
_BAILIAN_KEYS = ("chat_id", "parent_chat_id", "turn")
_INT_ONLY = {int}


def detect_format(value: Any) -> str:
    if isinstance(value, dict) and "hash_ids" in value:
        return "bailian" if any(key in value for key in _BAILIAN_KEYS) else "mooncake"
    return "requests"


def _int_field(value: dict, key: str, required: bool = True) -> int:
    number = value.get(key)
    if number is None and not required:
        return 0
    if type(number) is not int or number < 0:
        raise ValueError(f"`{key}` must be a non-negative integer")
    return number


def _bad_ids_message(hash_ids: Any) -> str:
    """What is wrong with `hash_ids`: JSON integers past 64 bits arrive as floats."""
    if type(hash_ids) is list:
        for index, value in enumerate(hash_ids):
            if type(value) is float and value.is_integer() and abs(value) >= 2**63:
                return f"`hash_ids[{index}]` is beyond 64 bits (hash ids are 64-bit integers)"
            if type(value) is not int:
                return f"`hash_ids[{index}]` must be an integer, got {json_kind(value)}"
    return f"`hash_ids` must be a list of integers, got {json_kind(hash_ids)}"


def _compact_ids(hash_ids: list) -> Sequence[int]:
    """The ids as an `array('q')` (8 bytes each, no int objects), or the list if one overflows."""
    if type(hash_ids) is not list or (hash_ids and set(map(type, hash_ids)) != _INT_ONLY):
        raise ValueError(_bad_ids_message(hash_ids))
    try:
        return array("q", hash_ids)
    except OverflowError:
        return hash_ids


def _hash_record(
    value: Any, index: int, line: int | None, bailian: bool, sessions: dict
) -> TraceRecord:
    if type(value) is not dict:
        raise ValueError(f"expected a JSON object, got {json_kind(value)}")
    hash_ids = _compact_ids(value.get("hash_ids"))
    input_length = value.get("input_length")
    if type(input_length) is not int or input_length < 0:
        input_length = _int_field(value, "input_length")
    output_length = value.get("output_length", 0)
    if type(output_length) is not int or output_length < 0:
        output_length = _int_field(value, "output_length", required=False)
    stamp = value.get("timestamp", 0)
    if type(stamp) is not int and type(stamp) is not float:
        raise ValueError("`timestamp` must be a number")
    session = value.get("session_id")
    if session is None:
        session = value.get("chat_id")
    if session is not None:
        if type(session) is not str and type(session) is not int:
            raise ValueError("`session_id` (or `chat_id`) must be a string or an integer")
        session = str(session)
        session = sessions.setdefault(session, session)  # one string per session
    return TraceRecord(
        index,
        line,
        stamp * 1000.0 if bailian else float(stamp),
        input_length,
        output_length,
        None,
        hash_ids,
        session,
    )


def _checked_block_size(size: Any) -> int:
    """A line's `block_size` field, which must be a positive integer."""
    if type(size) is not int or size < 1:
        raise ValueError("`block_size` must be a positive integer")
    return size


def _skip_message(source: str, line: int | None, failure: Exception) -> str:
    """The note of a line left out: the file, the line where known, and why."""
    return f"{source}:{line}: {failure}" if line is not None else f"{source}: {failure}"


def _read_hash_records(entries: Iterator, trace: Trace, strict: bool) -> None:
    """Mooncake and Bailian lines into `trace.records` (the loop of traces of millions)."""
    records, skipped, source = trace.records, trace.skipped, trace.source
    bailian = trace.format == "bailian"
    sessions: dict[str, str] = {}
    has_stamp = False
    for entry in entries:
        if type(entry) is not tuple:
            skipped.append(str(entry))
            continue
        line, value = entry
        try:
            record = _hash_record(value, len(records), line, bailian, sessions)
            if "block_size" in value:
                trace.block_size = _checked_block_size(value["block_size"])
        except ValueError as failure:
            if strict:
                raise InputError(source, str(failure), line) from None
            skipped.append(_skip_message(source, line, failure))
            continue
        if not has_stamp and "timestamp" in value:
            has_stamp = True
        records.append(record)
    trace.has_timestamps = has_stamp


def record_of_request(
    request: Any,
    token_ids: list[int],
    index: int,
    cache_salt: str | None = None,
    routing: bool = True,
) -> TraceRecord:
    """The record of a rendered request (`cache_salt`: the settings' salt, over the request's;
    `routing`: keep the text routers that key on characters read, else None)."""
    return TraceRecord(
        index=index,
        line=request.line,
        timestamp_ms=request.timestamp if request.timestamp is not None else 0.0,
        input_length=len(token_ids),
        output_length=request.output_length or 0,
        token_ids=token_ids,
        session_id=request.session_id,
        cache_salt=cache_salt or request.cache_salt,
        observed_cached_tokens=request.cached_tokens,
        routing_text=_joined_text(request) if routing else None,
        model=request.model,
    )


def _request_converter(
    settings: Any, kept: dict[int | None, Any] | None = None
) -> Callable[..., list[TraceRecord | Exception]]:
    """Renders chunks of request bodies with the real tokenizer (`settings`: pipeline
    Settings): the chunk's templates on this thread, then its new text encoded in one batch
    on `settings.jobs` threads (`pcache.pipeline.RenderStage`); the ids are those of
    rendering each request alone. `kept`: each parsed request is also put there, by line."""
    from pcache.pipeline import RenderStage
    from pcache.prompt.renderers.render import prompt_token_ids, resolve_renderer
    from pcache.prompt.shapes.request import KIND_PROMPT, KIND_TOKEN_IDS, request_from_document
    from pcache.prompt.tokenizers.segment_cache import SegmentCachedRenderer

    options = settings.render_options()
    stages: list = []

    def stage_of():
        if not stages:  # the tokenizer is loaded at the first request that needs it
            renderer = SegmentCachedRenderer(resolve_renderer(settings.tokenizer))
            stages.append(RenderStage(renderer, options, settings.jobs))
        return stages[0]

    def convert(entries: list[tuple[int | None, Any]], source: str) -> list:
        """One record, or the exception its line raised, per (line, value), in order."""
        requests: list = []
        for line, value in entries:
            try:
                requests.append(request_from_document(value, source, line))
            except (ValueError, InputError) as failure:
                requests.append(failure)
            else:
                if kept is not None:
                    kept[line] = requests[-1]
        templated = [
            item
            for item in requests
            if not isinstance(item, Exception) and item.kind not in (KIND_PROMPT, KIND_TOKEN_IDS)
        ]
        texts = {}
        if templated:
            texts = dict(zip(map(id, templated), stage_of().prepare(templated), strict=True))
        results: list = []
        for request in requests:
            if isinstance(request, Exception):
                results.append(request)
                continue
            try:
                text = texts.get(id(request))
                if request.token_ids is not None:
                    token_ids = list(request.token_ids)
                elif text is not None:
                    token_ids = stage_of().renderer.encode(text[0])
                else:
                    token_ids = prompt_token_ids(request, stage_of().renderer, options)
            except (ValueError, InputError) as failure:
                results.append(failure)
                continue
            results.append(record_of_request(request, token_ids, 0, settings.cache_salt))
        return results

    return convert


def _joined_text(request: Any) -> str:
    """The messages' text contents joined with nothing between them (or the prompt), as
    routers that key on characters read a request."""
    if request.prompt is not None:
        return request.prompt
    parts: list[str] = []
    for message in request.messages:
        content = message.get("content")
        if isinstance(content, str):
            parts.append(content)
        elif isinstance(content, list):
            parts.extend(
                part["text"]
                for part in content
                if isinstance(part, dict) and isinstance(part.get("text"), str)
            )
    return "".join(parts)


def read_request_records(
    entries: Iterator,
    trace: Trace,
    strict: bool,
    settings: Any,
    failures: list[InputError] | None = None,
) -> None:
    """Request bodies, rendered and tokenized in chunks, into `trace.records` (`failures`: the
    error `strict` would raise, for each line that failed)."""
    from pcache.pipeline import RENDER_CHUNK, Settings

    convert = _request_converter(settings or Settings(), trace.requests)
    chunk: list[tuple[int | None, Any]] = []
    for entry in itertools.chain(entries, (None,)):
        if entry is not None and not isinstance(entry, InputError):
            chunk.append(entry)
            if len(chunk) < RENDER_CHUNK:
                continue
        if chunk:
            add_request_records(trace, chunk, convert(chunk, trace.source), strict, failures)
            chunk = []
        if isinstance(entry, InputError):
            trace.skipped.append(str(entry))
            if failures is not None:
                failures.append(entry)


def add_request_records(
    trace: Trace,
    entries: list[tuple[int | None, Any]],
    converted: list,
    strict: bool,
    failures: list[InputError] | None = None,
) -> None:
    """Append the records of converted request lines to `trace` (numbered in order), and the
    reason of each line that failed to `trace.skipped` (`strict`: raise the first; `failures`:
    the error `strict` would raise, for each line that failed)."""
    source = trace.source
    for (line, value), result in zip(entries, converted, strict=True):
        if isinstance(result, Exception):
            if isinstance(result, InputError):
                failure = result
                message = str(result)
            else:
                failure = InputError(source, str(result), line)
                message = _skip_message(source, line, result)
            if strict:
                raise failure from None
            if failures is not None:
                failures.append(failure)
            trace.skipped.append(message)
            continue
        trace.has_timestamps = trace.has_timestamps or (
            isinstance(value, dict) and "timestamp" in value
        )
        result.index = len(trace.records)
        trace.records.append(result)


def no_valid_records(trace: Trace) -> str:
    """Why a trace yielded nothing: the reason of its first skipped line, and the format."""
    if not trace.skipped:
        return "no valid requests in the trace"
    first = trace.skipped[0]
    reason = (
        first[len(trace.source) :].lstrip(":0123456789 ")
        if first.startswith(trace.source)
        else first
    )
    return (
        f"no valid requests in the trace read as {trace.format} records"
        f" ({len(trace.skipped)} {'line' if len(trace.skipped) == 1 else 'lines'} skipped);"
        f" the first: {reason}"
    )


def read_trace(
    path: str | os.PathLike[str] | Sequence[Any],
    *,
    trace_format: str = "auto",
    strict: bool = False,
    settings: Any = None,
    block_size: int | None = None,
    keep_requests: bool = False,
) -> Trace:
    """Read every record of a trace file, or of parsed JSON values in arrival order
    (`settings`: a `pcache.pipeline.Settings`; `keep_requests`: a request trace keeps each
    record's parsed request in `trace.requests`)."""
    if trace_format not in FORMATS:
        raise OptionError("trace_format", f"must be one of {', '.join(FORMATS)}")
    in_memory = not isinstance(path, str | os.PathLike)
    source = "<memory>" if in_memory else display_name(path)
    trace = Trace(source=source, format=trace_format, block_size=None)
    if keep_requests:
        trace.requests = {}
    if in_memory:
        entries: Iterator = iter(list(enumerate(path, 1)))
    else:
        entries = iter_values(path, skip_errors=not strict)
    entries = _with_format(entries, trace)
    if trace.format in ("mooncake", "bailian"):
        _read_hash_records(entries, trace, strict)
    else:
        read_request_records(entries, trace, strict, settings)
    if not trace.records:
        raise InputError(source, no_valid_records(trace))
    if trace.format in ("mooncake", "bailian") and trace.block_size is None:
        trace.block_size = MOONCAKE_BLOCK_SIZE if trace.format == "mooncake" else BAILIAN_BLOCK_SIZE
    if block_size is not None and trace.format in ("mooncake", "bailian"):
        trace.block_size = block_size
    stamps = [record.timestamp_ms for record in trace.records]
    if any(later < earlier for earlier, later in itertools.pairwise(stamps)):
        trace.records.sort(key=lambda record: record.timestamp_ms)
        trace.reordered = True
    return trace


def _with_format(entries: Iterator, trace: Trace) -> Iterator:
    """`entries` from the first valid one, which decides `trace.format` when it is "auto"
    (the invalid ones before it are counted as skipped)."""
    for entry in entries:
        if isinstance(entry, InputError):
            trace.skipped.append(str(entry))
            continue
        if trace.format == "auto":
            trace.format = detect_format(entry[1])
        return itertools.chain((entry,), entries)
    return iter(())


class NotStreamable(Exception):
    """The trace cannot be replayed as it is read: out of timestamp order, or its lines
    disagree on the block size (`read_trace` reads it whole)."""


def stream_hash_trace(
    path: str | os.PathLike[str],
    *,
    trace_format: str = "auto",
    strict: bool = False,
    block_size: int | None = None,
) -> tuple[Trace, Iterator[TraceRecord]] | None:
    """A Mooncake or Bailian trace file as it is read: its header (`Trace` without records:
    source, format, block size; `skipped` and `has_timestamps` fill as the records are read)
    and its records in file order, one at a time. None when the file holds request bodies.
    The iterator raises `NotStreamable` where `read_trace` would reorder the records or take
    another line's block size, and `InputError` at its end if no record was valid."""
    if trace_format not in FORMATS:
        raise OptionError("trace_format", f"must be one of {', '.join(FORMATS)}")
    source = display_name(path)
    trace = Trace(source=source, format=trace_format, block_size=None)
    entries = iter_values(path, skip_errors=not strict)
    entries = _with_format(entries, trace)
    if trace.format not in ("mooncake", "bailian"):
        return None
    first = next(entries, None)
    if first is not None:
        entries = itertools.chain((first,), entries)
        if type(first) is tuple and isinstance(first[1], dict):
            size = first[1].get("block_size")
            if type(size) is int and size >= 1:
                trace.block_size = size
    if trace.block_size is None:
        trace.block_size = MOONCAKE_BLOCK_SIZE if trace.format == "mooncake" else BAILIAN_BLOCK_SIZE
    declared = trace.block_size
    if block_size is not None:
        trace.block_size = block_size
    return trace, _stream_records(entries, trace, strict, declared, block_size is not None)


def _stream_records(
    entries: Iterator, trace: Trace, strict: bool, declared: int, overridden: bool
) -> Iterator[TraceRecord]:
    skipped, source = trace.skipped, trace.source
    bailian = trace.format == "bailian"
    sessions: dict[str, str] = {}
    count = 0
    latest = -math.inf
    for entry in entries:
        if type(entry) is not tuple:
            skipped.append(str(entry))
            continue
        line, value = entry
        try:
            record = _hash_record(value, count, line, bailian, sessions)
            if "block_size" in value:
                size = _checked_block_size(value["block_size"])
                if size != declared and not overridden:
                    raise NotStreamable("the lines disagree on the block size")
        except ValueError as failure:
            if strict:
                raise InputError(source, str(failure), line) from None
            skipped.append(_skip_message(source, line, failure))
            continue
        if record.timestamp_ms < latest:
            raise NotStreamable("records out of timestamp order")
        latest = record.timestamp_ms
        if not trace.has_timestamps and "timestamp" in value:
            trace.has_timestamps = True
        count += 1
        if len(sessions) > 4096:  # one string per session, among the recent ones
            sessions.clear()
        yield record
    if not count:
        raise InputError(source, no_valid_records(trace))
