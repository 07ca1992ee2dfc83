"""Requests from what a library caller holds: body dicts, SDK objects, `Request`s, or paths.

SDK objects (pydantic models, anywhere in a body: an SDK message appended to `messages`) become
the JSON they serialize to (`model_dump(mode="json", by_alias=True, exclude_none=True)`). A
path is read as the command line reads it. In-memory values are labelled `<source>:<n>`, n
counted from 1 in the order given; they are seen in the context of the values before them, as
the lines of a log are (`pcache.prompt.reading.expand`).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

from pcache.errors import InputError
from pcache.prompt.reading.loading import Document, display_name, iter_documents
from pcache.prompt.reading.memory_values import json_value
from pcache.prompt.shapes.request import Request, request_from_document, request_of

MEMORY = "<memory>"


def plain(value: Any, source: str = MEMORY, line: int | None = None) -> Any:
    """`value` as the JSON it stands for, SDK objects replaced by their JSON value; what no
    JSON document holds, cycles and nesting past the readers' limit are refused
    (`pcache.prompt.reading.memory_values`)."""
    return json_value(value, source, line)


def is_path(value: Any) -> bool:
    return isinstance(value, str | os.PathLike)


def _is_single(items: Any) -> bool:
    return is_path(items) or isinstance(items, dict | Request) or hasattr(items, "model_dump")


def iter_inputs(
    items: Any, source: str = MEMORY
) -> Iterator[Request | Document | tuple[str, int | None, Any]]:
    """Each `Request` given, each `Document` of a path (errors in it point at line:column),
    and (source, line, JSON value) for everything else, in order.

    One in-memory value has no line; values of a sequence are numbered from 1.
    """
    from pcache.prompt.reading.expand import OTLP_KEY, model_spans
    from pcache.prompt.shapes.chains import ResponseChains

    single = _is_single(items)
    chains = ResponseChains()
    for count, item in enumerate([items] if single else items, 1):
        if isinstance(item, Request):
            yield item
        elif is_path(item):
            for document in iter_documents(item):
                assert isinstance(document, Document)
                yield document
        else:
            line = None if single else count
            value = plain(item, source, line)
            if isinstance(value, dict) and OTLP_KEY in value:
                for _, span in model_spans(value):
                    yield source, line, span
            else:
                yield source, line, chains.prepare(value)


def iter_requests(items: Any, source: str = MEMORY) -> Iterator[Request]:
    """Every request in `items` (one item or a sequence; see the module docstring), in order."""
    for entry in iter_inputs(items, source):
        if isinstance(entry, Request):
            yield entry
        elif isinstance(entry, Document):
            yield request_of(entry)
        else:
            yield request_from_document(entry[2], *entry[:2])


def requests_from(items: Any, source: str = MEMORY) -> list[Request]:
    return list(iter_requests(items, source))


def one_request(item: Any, source: str = MEMORY) -> Request:
    """The single request `item` is or holds (a file must hold exactly one)."""
    requests = iter_requests(item, source)
    first = next(requests, None)
    if first is None:
        raise InputError(display_name(item) if is_path(item) else source, "holds no request")
    if next(requests, None) is not None:
        raise InputError(first.source, "holds several requests; pass a file with one request")
    return first


def values_from(items: Any, source: str = MEMORY) -> list[Any]:
    """The JSON value of every request in `items` (a `Request` gives its body)."""
    return [
        entry.raw
        if isinstance(entry, Request)
        else entry.value
        if isinstance(entry, Document)
        else entry[2]
        for entry in iter_inputs(items, source)
    ]
