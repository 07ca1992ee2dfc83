"""One recorded request as a JSONL line in the Batch-style wrapper the request readers parse.

`{"timestamp", "session_id", "method", "url", "status", "usage", "output_length", "response",
"body"}`: `body` is the request body byte for byte (re-serialized only if it spans several
lines), the URL loses its query and credentials, and no header is ever written. `response`
(`{"id", "output"}`) is kept for OpenAI Responses calls only: a later request that continues
it by `previous_response_id` is rebuilt from it (`pcache.prompt.shapes.chains`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

import orjson

from pcache.record.usage import output_length

SessionKey = str | Callable[[dict[str, Any]], str | None] | None
"""A fixed session id, or a function of the request body returning one (None: no id)."""

READABLE_KEYS = ("messages", "prompt", "token_ids")
"""Bodies pcache reads at any URL: Chat Completions and Anthropic (`messages`), completions
(`prompt`), token ids."""
READABLE_AT = (
    ("input", ("/responses",)),
    ("contents", (":generateContent", ":streamGenerateContent")),
)
"""Bodies pcache reads at the endpoints that take them: OpenAI Responses (`input`; an
embeddings body has one too), Gemini generateContent (`contents`)."""


def is_readable(body: dict[str, Any], url: str) -> bool:
    if any(key in body for key in READABLE_KEYS):
        return True
    return any(key in body and url.endswith(ends) for key, ends in READABLE_AT)


@dataclass(slots=True)
class PendingLine:
    """A request sent and not yet answered: what its line will say, less status and usage."""

    timestamp: str
    session_id: str | None
    method: str
    url: str
    body: bytes


def iso(moment: datetime | None = None) -> str:
    """UTC ISO 8601 with milliseconds (a naive `moment` is local time); now by default."""
    moment = datetime.now(timezone.utc) if moment is None else moment.astimezone(timezone.utc)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def begin_line(
    method: str, url: str, body: bytes, session: SessionKey, timestamp: str | None = None
) -> PendingLine | None:
    """The pending line of a request, or None when its body is not a request pcache reads."""
    if not body:
        return None
    try:
        parsed = orjson.loads(body)
    except orjson.JSONDecodeError:
        return None
    if not isinstance(parsed, dict) or not is_readable(parsed, url):
        return None
    if b"\n" in body:
        body = orjson.dumps(parsed)
    session_id = session(parsed) if callable(session) else session
    return PendingLine(
        timestamp or iso(), None if session_id is None else str(session_id), method, url, body
    )


def finish_line(
    pending: PendingLine,
    status: int | None,
    usage: dict[str, Any] | None,
    response: dict[str, Any] | None = None,
) -> bytes:
    head: dict[str, Any] = {"timestamp": pending.timestamp}
    if pending.session_id is not None:
        head["session_id"] = pending.session_id
    head.update(method=pending.method, url=pending.url, status=status)
    if usage is not None:
        head["usage"] = usage
        produced = output_length(usage)
        if produced is not None:
            head["output_length"] = produced
    if response is not None:
        head["response"] = response
    return orjson.dumps(head)[:-1] + b',"body":' + pending.body + b"}\n"
