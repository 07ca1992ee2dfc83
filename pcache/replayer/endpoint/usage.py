"""A response's usage, checked against the prompt it answers: what cannot be true is unknown.

The counts a server reports are data only when they can be true of the request sent: whole
numbers from 0 to `MAX_REQUEST_TOKENS`; `prompt_tokens` at least 1 and at most
`MAX_PROMPT_RATIO` times pcache's own count plus `MAX_PROMPT_SLACK` (a hosted API may add a
system prompt, a server's template its own tokens, never a million); cached and
cache-written tokens within the prompt. A count that fails is None (unknown) and the
`problem` says why; the report counts such requests and quotes the first.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pcache.replayer.endpoint.reported_cache import (
    MAX_REQUEST_TOKENS,
    ReportedCache,
    described,
    reported_cache,
)

MAX_PROMPT_RATIO = 4
MAX_PROMPT_SLACK = 65_536
ANTHROPIC_PARTS = ("input_tokens", "cache_read_input_tokens", "cache_creation_input_tokens")


@dataclass(frozen=True, slots=True)
class Usage:
    """The checked counts of one response (None: not reported, or impossible)."""

    prompt_tokens: int | None
    completion_tokens: int | None
    cache: ReportedCache
    problem: str | None = None


def _count(usage: dict[str, Any], key: str, problems: list[str]) -> int | None:
    value = usage.get(key)
    if value is None:
        return None
    if type(value) is int and 0 <= value <= MAX_REQUEST_TOKENS:
        return value
    problems.append(f"`usage.{key}` is {described(value)}")
    return None


def checked_usage(
    usage: Any, body: dict[str, Any], api: str, own_prompt_tokens: int | None
) -> Usage:
    """The usage of a response (`usage`: its usage object, `body`: the chunk holding
    SGLang's extensions) checked against the prompt pcache sent (`own_prompt_tokens`: its
    length; with the completions API, which sends token ids, exactly the prompt's)."""
    problems: list[str] = []
    if usage is not None and not isinstance(usage, dict):
        problems.append(f"`usage` is {described(usage)}, not an object")
        usage = None
    usage = usage or {}
    if api == "anthropic":  # the prompt is the sum of its three parts
        parts = [_count(usage, key, problems) for key in ANTHROPIC_PARTS]
        known = [part for part in parts if part is not None]
        prompt = sum(known) if known and not problems else None
        output_key = "output_tokens"
    else:
        prompt = _count(usage, "prompt_tokens", problems)
        output_key = "completion_tokens"
    completion = _count(usage, output_key, problems)
    cache = reported_cache(body, usage)
    if cache.problem:
        problems.append(cache.problem)
    bound = None
    if own_prompt_tokens:
        bound = max(own_prompt_tokens * MAX_PROMPT_RATIO, own_prompt_tokens + MAX_PROMPT_SLACK)
    if prompt is not None and bound is not None and (prompt == 0 or prompt > bound):
        problems.append(f"`prompt_tokens` {prompt:,} for a prompt of {own_prompt_tokens:,} tokens")
        prompt = None
    limit = prompt if prompt is not None else bound
    if prompt is None and api == "completions" and own_prompt_tokens:
        limit = own_prompt_tokens  # the ids sent are the prompt
    reused = (cache.cached_tokens or 0) + (cache.cache_write_tokens or 0)
    if limit is not None and reused > limit:
        if prompt is not None:
            what = f"the prompt's {prompt:,} tokens"
        elif limit == own_prompt_tokens:
            what = f"the {limit:,} prompt tokens sent"
        else:
            what = f"any prompt of {own_prompt_tokens:,} tokens"
        problems.append(f"`{cache.field}` {reused:,} exceeds {what}")
        cache = ReportedCache(None, field=cache.field)
    return Usage(prompt, completion, cache, problems[0] if problems else None)
