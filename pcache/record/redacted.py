"""A recorded request without its text: what a cache needs of it, as a hash-id trace line.

`Recorder(path, redact=True)` writes `{"timestamp" (ms), "session_id", "method", "url",
"status", "usage", "output_length", "model", "input_length", "block_size", "hash_ids"}`: the
prompt rendered and tokenized as `pcache replay` would (its settings), its chained block hashes
as 64-bit integers, and no string the body held but the model's name. `pcache replay` reads it
as a hash-id trace (`mooncake` with its own `block_size`). The session id becomes its shape
(equal ids stay equal), and the hashes are salted with the redaction key, so that nobody
without it can confirm a guessed prompt against them.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime
from typing import Any

import orjson

from pcache.pipeline import Settings, hash_request
from pcache.prompt.shapes.request import request_from_document
from pcache.record.line import PendingLine
from pcache.record.usage import output_length
from pcache.text.redaction import Redactor, key_of_environment


class RedactedLines:
    """Turns finished requests into redacted lines, under one key and one set of settings."""

    def __init__(self, settings: Settings | None = None, key: bytes | None = None):
        self.redactor = Redactor(key or key_of_environment())
        salt = self.redactor.digest("pcache block hashes")
        self.settings = replace(settings or Settings(), cache_salt=salt)

    def line(self, pending: PendingLine, status: int | None, usage: dict[str, Any] | None) -> bytes:
        body = orjson.loads(pending.body)
        request = request_from_document(body, "recording", None)
        hashed = hash_request(request, self.settings)
        head: dict[str, Any] = {"timestamp": _milliseconds(pending.timestamp)}
        if pending.session_id is not None:
            head["session_id"] = self.redactor.shape(pending.session_id)
        head.update(method=pending.method, url=pending.url, status=status)
        if usage is not None:
            head["usage"] = _numbers(usage)
            produced = output_length(usage)
            if produced is not None:
                head["output_length"] = produced
        if isinstance(body.get("model"), str):
            head["model"] = body["model"]
        head.update(
            input_length=hashed.rendered.num_tokens,
            block_size=self.settings.block_size,
            hash_ids=[int.from_bytes(digest[:8], "big", signed=True) for digest in hashed.hashes],
        )
        return orjson.dumps(head) + b"\n"

    def finish(
        self, pending: PendingLine, status: int | None, usage: Any, response: Any = None
    ) -> bytes:
        """`pcache.record.line.finish_line`'s twin (the response, which holds text, is never
        kept)."""
        del response
        return self.line(pending, status, usage if isinstance(usage, dict) else None)


def _milliseconds(stamp: str) -> float:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp() * 1000.0


def _numbers(usage: dict[str, Any]) -> dict[str, Any]:
    """The usage object's counts (nested objects kept, strings left out)."""
    kept: dict[str, Any] = {}
    for key, value in usage.items():
        if isinstance(value, dict):
            kept[key] = _numbers(value)
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            kept[key] = value
    return kept
