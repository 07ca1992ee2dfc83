"""The cached prompt tokens a server reports, in every shape servers use; absent is unknown.

Shapes, first match wins:
- `usage.prompt_tokens_details.cached_tokens`: OpenAI, vLLM (`--enable-prompt-tokens-details`),
  SGLang (`--enable-cache-report`), `pcache serve`;
- `usage.input_tokens_details.cached_tokens`: the Responses API shape;
- `sglext.cached_tokens` or the sum of `sglext.cached_tokens_details`, and
  `meta_info.cached_tokens`: SGLang's own fields (`--enable-cache-report`);
- `usage.cache_read_input_tokens` (+ `cache_creation_input_tokens`, written): Anthropic.
A response without any of them says nothing about caching: its cached tokens are None, never 0.
A field that is there but holds no possible count (negative, fractional, a string, past
`MAX_REQUEST_TOKENS`) is unknown too, and `problem` says what it held.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pcache.prompt.shapes.fields import json_kind

MAX_REQUEST_TOKENS = 1 << 24
"""More tokens than any model's context: a count past it is not one."""
ENABLE_HINTS = {
    "vllm": "start vLLM with --enable-prompt-tokens-details",
    "sglang": "start SGLang with --enable-cache-report",
    "pcache": "pcache serve always reports them; check the server's version",
}
GENERIC_HINT = (
    "vLLM reports them with --enable-prompt-tokens-details, SGLang with --enable-cache-report"
)


@dataclass(frozen=True, slots=True)
class ReportedCache:
    """Cached (read) and, where the API has it, cache-written prompt tokens of one response."""

    cached_tokens: int | None
    cache_write_tokens: int | None = None
    field: str | None = None
    """Where the count came from (a dotted path), None when the response had none."""
    problem: str | None = None
    """Why a field that was there is not a count (then `cached_tokens` is None)."""


def _int(value: Any) -> int | None:
    return value if type(value) is int and 0 <= value <= MAX_REQUEST_TOKENS else None


def described(value: Any) -> str:
    """A value as a message quotes it: a number itself, anything else by its JSON kind."""
    if type(value) is int or type(value) is float:
        return f"{value:,}" if abs(value) < 1e18 else repr(value)
    return json_kind(value)


def _bad(path: str, value: Any) -> ReportedCache:
    return ReportedCache(None, field=path, problem=f"`{path}` is {described(value)}")


def _counted(path: str, value: Any) -> ReportedCache:
    """The count a present field holds, or why it holds none."""
    count = _int(value)
    return ReportedCache(count, field=path) if count is not None else _bad(path, value)


def _path(data: Any, *keys: str) -> Any:
    for key in keys:
        if not isinstance(data, dict):
            return None
        data = data.get(key)
    return data


def reported_cache(body: dict[str, Any], usage: dict[str, Any] | None) -> ReportedCache:
    """Read the cached tokens of a response body (or a stream's last chunk) and its usage:
    the first field present decides."""
    usage = usage if isinstance(usage, dict) else {}
    for keys in (
        ("prompt_tokens_details", "cached_tokens"),
        ("input_tokens_details", "cached_tokens"),
    ):
        value = _path(usage, *keys)
        if value is not None:
            return _counted("usage." + ".".join(keys), value)
    extension = body.get("sglext") if isinstance(body, dict) else None
    if isinstance(extension, dict):
        value = extension.get("cached_tokens")
        if value is not None:
            return _counted("sglext.cached_tokens", value)
        details = extension.get("cached_tokens_details")
        if isinstance(details, dict) and details:
            path = "sglext.cached_tokens_details"
            bad = [value for value in details.values() if _int(value) is None]
            if bad:
                return _bad(path, bad[0])
            return ReportedCache(sum(details.values()), field=path)
    value = _path(body, "meta_info", "cached_tokens")
    if value is not None:
        return _counted("meta_info.cached_tokens", value)
    read_value = usage.get("cache_read_input_tokens")
    written_value = usage.get("cache_creation_input_tokens")
    if read_value is not None or written_value is not None:
        path = "usage.cache_read_input_tokens"
        read, written = _int(read_value), _int(written_value)
        if read_value is not None and read is None:
            return _bad(path, read_value)
        if written_value is not None and written is None:
            return _bad("usage.cache_creation_input_tokens", written_value)
        return ReportedCache(read or 0, written, field=path)
    return ReportedCache(None)


def enable_hint(server_kind: str | None) -> str:
    """How to make a server report cached tokens."""
    return ENABLE_HINTS.get(server_kind or "", GENERIC_HINT)
