"""Which reader a request body needs: the wire shapes beyond Chat Completions and Anthropic.

Each shape is one module (`responses`, `gemini`, `bedrock`, `otel_spans`, `openinference`) with
a `looks_like(body)` test and a `read(request, outer, body, where)` that fills a `Request` in
the common chat shape. The body may be bare or inside a recorder line (`{url, body}` with
optional `session_id`, `timestamp`, `usage`); `outer` is that line.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

Reader = Callable[..., None]


def reader_for(body: dict[str, Any]) -> Reader | None:
    """The reader of `body`'s shape, or None for the shapes `pcache.prompt.shapes.request` reads."""
    if "token_ids" in body or ("prompt" in body and "messages" not in body):
        return None
    for module in _shape_modules():
        if module.looks_like(body):
            return module.read
    return None


@functools.cache
def _shape_modules() -> tuple[Any, ...]:
    """The shape modules in the order they are tried, imported by the first `reader_for`."""
    from pcache.prompt.shapes import bedrock, gemini, openinference, otel_spans, responses

    return (responses, gemini, bedrock, openinference, otel_spans)
