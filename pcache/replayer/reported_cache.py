"""The cached prompt tokens a server reports, in every shape servers use; absent is unknown.

Shapes, first match wins:
- `usage.prompt_tokens_details.cached_tokens`: OpenAI, vLLM (`--enable-prompt-tokens-details`),
  SGLang (`--enable-cache-report`), `pcache serve`;
- `usage.input_tokens_details.cached_tokens`: the Responses API shape;
- `sglext.cached_tokens` or the sum of `sglext.cached_tokens_details`, and
  `meta_info.cached_tokens`: SGLang's own fields (`--enable-cache-report`);
- `usage.cache_read_input_tokens` (+ `cache_creation_input_tokens`, written): Anthropic.
A response without any of them says nothing about caching: its cached tokens are None, never 0.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

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


def _int(value: Any) -> int | None:
    return value if type(value) is int and value >= 0 else None


def _path(data: Any, *keys: str) -> Any:
    for key in keys:
        if not isinstance(data, dict):
            return None
        data = data.get(key)
    return data


def reported_cache(body: dict[str, Any], usage: dict[str, Any] | None) -> ReportedCache:
    """Read the cached tokens of a response body (or a stream's last chunk) and its usage."""
    usage = usage if isinstance(usage, dict) else {}
    for keys in (
        ("prompt_tokens_details", "cached_tokens"),
        ("input_tokens_details", "cached_tokens"),
    ):
        count = _int(_path(usage, *keys))
        if count is not None:
            return ReportedCache(count, field="usage." + ".".join(keys))
    extension = body.get("sglext") if isinstance(body, dict) else None
    if isinstance(extension, dict):
        count = _int(extension.get("cached_tokens"))
        if count is not None:
            return ReportedCache(count, field="sglext.cached_tokens")
        details = extension.get("cached_tokens_details")
        if (
            isinstance(details, dict)
            and details
            and all(_int(v) is not None for v in details.values())
        ):
            return ReportedCache(sum(details.values()), field="sglext.cached_tokens_details")
    count = _int(_path(body, "meta_info", "cached_tokens"))
    if count is not None:
        return ReportedCache(count, field="meta_info.cached_tokens")
    read = _int(usage.get("cache_read_input_tokens"))
    written = _int(usage.get("cache_creation_input_tokens"))
    if read is not None or written is not None:
        return ReportedCache(read or 0, written, field="usage.cache_read_input_tokens")
    return ReportedCache(None)


def enable_hint(server_kind: str | None) -> str:
    """How to make a server report cached tokens."""
    return ENABLE_HINTS.get(server_kind or "", GENERIC_HINT)
