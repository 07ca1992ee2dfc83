r"""## What it does
Counts `cache_control` markers in an Anthropic Messages request (tools, system blocks, message
content blocks, and the top-level automatic marker) and reports more than four. Bedrock Converse
requests are counted the same way: their `cachePoint` blocks (in `toolConfig.tools`, `system`
and message content) against Bedrock's maximum checkpoints per request (the `bedrock` profile).

## Why is this bad?
The API rejects the request: "A maximum of 4 blocks with cache_control may be provided". Gateways
that add their own marker turn a valid request into a failing one. Bedrock rejects a Converse
request with more checkpoints than the model allows (4 for every model the profile lists).

## Example
```json
{"model": "claude-sonnet-4-6", "max_tokens": 256,
 "cache_control": {"type": "ephemeral"},
 "system": [{"type": "text", "text": "Rules A", "cache_control": {"type": "ephemeral"}},
            {"type": "text", "text": "Rules B", "cache_control": {"type": "ephemeral"}}],
 "messages": [{"role": "user", "content": [
   {"type": "text", "text": "Doc 1", "cache_control": {"type": "ephemeral"}},
   {"type": "text", "text": "Doc 2", "cache_control": {"type": "ephemeral"}}]}]}
```

Use instead:
```json
{"model": "claude-sonnet-4-6", "max_tokens": 256,
 "system": [{"type": "text", "text": "Rules A"},
            {"type": "text", "text": "Rules B", "cache_control": {"type": "ephemeral"}}],
 "messages": [{"role": "user", "content": [
   {"type": "text", "text": "Doc 1"},
   {"type": "text", "text": "Doc 2", "cache_control": {"type": "ephemeral"}}]}]}
```
"""

from __future__ import annotations

from collections.abc import Iterator

from pcache.cache.profiles import load_profile
from pcache.prompt.shapes.request import KIND_ANTHROPIC, Request
from pcache.rules.base import Rule, Violation
from pcache.rules.cache_points import bedrock_profile, is_bedrock
from pcache.rules.context import LintContext

RULE = Rule(
    code="PC502",
    name="anthropic-too-many-breakpoints",
    severity="error",
    summary="More cache breakpoints than the API accepts (Anthropic markers, Bedrock cachePoints)",
)


def check(ctx: LintContext) -> Iterator[Violation]:
    request = ctx.current.request
    if is_bedrock(request):
        yield from _bedrock(request)
        return
    if request.kind != KIND_ANTHROPIC:
        return
    limit = load_profile("anthropic").max_breakpoints
    markers = list(request.breakpoints)
    automatic = isinstance(request.raw.get("cache_control"), dict)
    count = len(markers) + (1 if automatic else 0)
    if count <= limit:
        return
    where = markers[limit - (1 if automatic else 0)] if len(markers) >= limit else "cache_control"
    if request.path_prefix:
        where = f"{request.path_prefix}.{where}"
    note = " (including the top-level automatic one)" if automatic else ""
    yield Violation(
        f"{count} cache_control markers{note};"
        f" the API accepts at most {limit} and rejects this request",
        where,
        token_position=0,
        claims="none",
        fix_title=f"keep at most {limit} markers, on the last block of each stable section",
    )


def _bedrock(request: Request) -> Iterator[Violation]:
    limit = bedrock_profile(request).max_breakpoints
    markers = request.breakpoints
    if not limit or len(markers) <= limit:
        return
    where = markers[limit]
    yield Violation(
        f"{len(markers)} cachePoint blocks; Bedrock accepts at most {limit} checkpoints per"
        " request and rejects this one",
        f"{request.path_prefix}.{where}" if request.path_prefix else where,
        token_position=0,
        claims="none",
        fix_title=f"keep at most {limit} cachePoints, after the last block of each stable section",
    )
