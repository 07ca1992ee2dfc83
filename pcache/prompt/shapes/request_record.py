"""The normalized request record every reader fills, and the sidecar fields of a log line.

`Request` holds one request in the common chat shape (`messages`, `tools`) with the JSON
paths back into the user's body (`origins`); `read_sidecar` reads the keys a log line may
carry beside the body (`timestamp`, `session_id`, `output_length`, `usage`);
`cached_tokens_of` reads the cached prompt tokens out of any provider's usage object.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any

import orjson

from pcache.prompt.shapes.fields import Where

KIND_OPENAI = "openai"
KIND_ANTHROPIC = "anthropic"
KIND_PROMPT = "prompt"
KIND_TOKEN_IDS = "token_ids"
KIND_GEMINI = "gemini"
KIND_BEDROCK = "bedrock"
KIND_SPAN = "span"

SIDECAR_KEYS = ("timestamp", "session_id", "output_length", "usage")


@dataclass(slots=True)
class Request:
    """One request, normalized. `raw` is the body exactly as parsed (key order kept)."""

    source: str
    line: int | None
    kind: str
    raw: dict[str, Any]
    path_prefix: str = ""
    model: str | None = None
    messages: list[dict[str, Any]] = field(default_factory=list)
    tools: list[dict[str, Any]] = field(default_factory=list)
    prompt: str | None = None
    token_ids: list[int] | None = None
    cache_salt: str | None = None
    session_id: str | None = None
    timestamp: float | None = None
    output_length: int | None = None
    usage: dict[str, Any] | None = None
    breakpoints: list[str] = field(default_factory=list)
    origins: dict[str, str] = field(default_factory=dict)
    shape: str = ""
    """The wire shape read: chat, responses, gemini, bedrock, otel, openinference."""
    cached_tokens: int | None = None
    """Prompt tokens the provider reported as read from its cache (the log's usage), if any."""
    annotations: dict[str, Any] = field(default_factory=dict)
    """The log line's `headers` and `metadata` objects beside the body (a gateway's log), for
    grouping the requests."""

    @property
    def label(self) -> str:
        return self.source if self.line is None else f"{self.source}:{self.line}"

    def source_path(self, normalized: str) -> str:
        """Map a normalized path (e.g. `messages[2].content`) to the path in the user's JSON."""
        origins = self.origins
        best = normalized if normalized in origins else ""
        cut = len(normalized)
        while not best:  # the longest key that is `normalized` cut before a "." or a "["
            cut = max(normalized.rfind(".", 0, cut), normalized.rfind("[", 0, cut))
            if cut <= 0:
                break
            if normalized[:cut] in origins:
                best = normalized[:cut]
        mapped = self.origins[best] + normalized[len(best) :] if best else normalized
        if self.path_prefix:
            return f"{self.path_prefix}.{mapped}" if mapped else self.path_prefix
        return mapped


_CACHED_PATHS = (
    ("prompt_tokens_details", "cached_tokens"),
    ("input_tokens_details", "cached_tokens"),
    ("cache_read_input_tokens",),
    ("cachedContentTokenCount",),
    ("cached_content_token_count",),
    ("cacheReadInputTokens",),
    ("prompt_cache_hit_tokens",),
)
"""Where each provider's usage reports the prompt tokens read from its cache: OpenAI Chat and
Responses, Anthropic, Gemini (REST and SDK spelling), Bedrock Converse, DeepSeek."""


def cached_tokens_of(usage: Any) -> int | None:
    """The cached prompt tokens a provider's `usage` object reports, if it reports them."""
    if not isinstance(usage, dict):
        return None
    for path in _CACHED_PATHS:
        value: Any = usage
        for key in path:
            value = value.get(key) if isinstance(value, dict) else None
        if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
            return value
    return None


ANNOTATION_KEYS = ("headers", "metadata")


def read_sidecar(
    request: Request, outer: dict[str, Any], body: dict[str, Any], where: Where
) -> None:
    if outer is not body:
        for key in ANNOTATION_KEYS:
            if isinstance(outer.get(key), dict):
                request.annotations[key] = outer[key]
    for holder in (body, outer):
        at = Where(where.source, where.line, where.prefix if holder is body else "")
        for key in SIDECAR_KEYS:
            if key in holder and getattr(request, key) is None:
                value = holder[key]
                if key == "timestamp" and value is not None:
                    request.timestamp = parse_timestamp(value)
                    if request.timestamp is None:
                        raise at.expect(
                            value, key, "milliseconds (a number) or an ISO 8601 date and time"
                        )
                elif key == "session_id":
                    request.session_id = at.identifier(holder, key, key)
                elif key == "output_length":
                    request.output_length = at.count(holder, key, key)
                elif key == "usage":
                    request.usage = at.object(holder, key, key)
    metadata = where.object(body, "metadata", "metadata")
    if request.session_id is None and metadata is not None:
        for key in ("session_id", "conversation_id", "thread_id"):
            if metadata.get(key) is not None:
                request.session_id = where.identifier(metadata, key, f"metadata.{key}")
                break


_ISO = re.compile(r"^\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}")


def parse_timestamp(value: Any) -> float | None:
    """Timestamps in milliseconds (finite numbers) or ISO 8601 strings, returned as ms."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int | float):
        stamp = float(value) if abs(value) < 1e300 else math.inf
        return stamp if math.isfinite(stamp) else None
    if isinstance(value, str) and _ISO.match(value):
        from datetime import datetime, timezone

        text = value.replace("Z", "+00:00")
        try:
            moment = datetime.fromisoformat(text)
        except ValueError:
            return None
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=timezone.utc)
        return moment.timestamp() * 1000.0
    return None


def function_call(call_id: Any, name: Any, arguments: Any) -> dict[str, Any]:
    """One tool call in the common chat shape."""
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def tool_use_call(where: Where, use: dict[str, Any], path: str, id_key: str) -> dict[str, Any]:
    """A tool-use block (`name`, `input` object and the id under `id_key`) as a tool call in the
    common chat shape; `path` is where the block sits."""
    arguments = use.get("input", {})
    if not isinstance(arguments, dict):
        raise where.expect(arguments, f"{path}.input", "an object")
    return function_call(
        where.identifier(use, id_key, f"{path}.{id_key}"),
        where.string(use, "name", f"{path}.name"),
        arguments,
    )


def parse_arguments(arguments: Any) -> Any:
    """Tool-call arguments given as a JSON string are parsed, as serving engines do."""
    if isinstance(arguments, str):
        try:
            return orjson.loads(arguments)
        except orjson.JSONDecodeError:
            return arguments
    return arguments
