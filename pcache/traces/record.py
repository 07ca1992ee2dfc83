"""`TraceRecord`: one request of a replay trace, whatever file format it came from.

A record carries either `token_ids` (pcache request JSONL, rendered with the real tokenizer,
or token-id traces) or `hash_ids` (Mooncake, Bailian: one id per block of `block_size`
tokens; equal ids are reusable KV blocks, the last block may be partial). Read from a file,
`hash_ids` is an `array('q')`: 8 bytes an id, where a list of ints takes about 40.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any


@dataclass(slots=True)
class TraceRecord:
    """One request: when it arrived, its prompt (token ids or block ids), and its output."""

    index: int
    line: int | None
    timestamp_ms: float
    input_length: int
    output_length: int = 0
    token_ids: list[int] | None = None
    hash_ids: Sequence[int] | None = None
    session_id: str | None = None
    cache_salt: str | None = None
    observed_cached_tokens: int | None = None
    output_token_ids: list[int] | None = None
    """Tokens a measured run generated for this request: a replay given them also writes
    their KV (every output token but the last, as an engine does), filling blocks."""
    routing_text: str | None = None
    """Request traces: the messages' text contents joined (or the prompt), no template: what
    character-keyed routers read (`pcache.replayer.fleet.routers`)."""
    model: str | None = None
    """Request traces: the model the request names (provider profiles' minimum by model)."""


@dataclass(slots=True)
class Trace:
    """All records of a trace in arrival order, and what reading it noticed."""

    source: str
    format: str
    block_size: int | None
    records: list[TraceRecord] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    reordered: bool = False
    has_timestamps: bool = False
    requests: dict[int | None, Any] | None = None
    """Request traces read with `keep_requests`: each record's parsed request
    (`pcache.prompt.shapes.request.Request`) by line, so what sends the bodies again (`replay
    --endpoint`) does not read the file twice. None: not kept."""

    @property
    def num_skipped(self) -> int:
        return len(self.skipped)
