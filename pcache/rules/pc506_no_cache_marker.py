r"""## What it does
Anthropic Messages bodies only. Reports the first request of a session whose prompt is above the
Anthropic minimum cacheable length (from `pcache/data/providers.json`) but that carries no
`cache_control` at all, neither on a block nor at the top level. A hint (info). A Bedrock
Converse request is checked the same way against the minimum tokens per checkpoint of its model
(the `bedrock` profile): above it, with no `cachePoint` block, it is reported.
Opt-in (`--extend-select PC506`): an opinion, not an observed break.

## Why is this bad?
Anthropic caches only at breakpoints. Without any marker nothing is cached and every request of
the session pays the full input price for its whole prompt.

## Example
```json
{"model": "claude-sonnet-4-6", "max_tokens": 64,
 "system": "You review contracts. Flag clauses that limit liability or renew automatically.",
 "messages": [{"role": "user", "content": "Review the attached contract."}]}
```
(the system prompt is shortened here; the documentation test repeats it 100 times to pass the
1024-token minimum)

Use instead:
```json
{"model": "claude-sonnet-4-6", "max_tokens": 64,
 "cache_control": {"type": "ephemeral"},
 "system": "You review contracts. Flag clauses that limit liability or renew automatically.",
 "messages": [{"role": "user", "content": "Review the attached contract."}]}
```
Add a top-level `cache_control` (automatic mode) or a marker on the last stable block.
"""

from __future__ import annotations

from collections.abc import Iterator

from pcache.cache.profiles import load_profile
from pcache.prompt.shapes.request import KIND_ANTHROPIC
from pcache.rules.base import Rule, Violation
from pcache.rules.cache_points import bedrock_profile, is_bedrock
from pcache.rules.context import LintContext, has_cache_marker

RULE = Rule(
    code="PC506",
    name="no-cache-marker",
    severity="info",
    summary="An Anthropic request above the cacheable minimum has no cache_control",
    default=False,
)


def minimum(ctx: LintContext) -> int:
    profile = ctx.settings.profile
    if profile.name == "anthropic":
        return profile.min_tokens
    return load_profile("anthropic").min_tokens


def check(ctx: LintContext) -> Iterator[Violation]:
    request = ctx.current.request
    if is_bedrock(request) and ctx.is_session_head and not request.breakpoints:
        tokens, floor = len(ctx.current.token_ids), bedrock_profile(request).min_tokens
        if tokens >= floor:
            yield Violation(
                f"{tokens} prompt tokens (minimum {floor} per checkpoint for"
                f" {request.model or 'this model'}) and no cachePoint block: Bedrock caches"
                " nothing for this session",
                request.source_path("messages[0]"),
                token_position=0,
                claims="none",
                fix_title="add a cachePoint after the last stable system block or tool",
            )
        return
    if request.kind != KIND_ANTHROPIC or not ctx.is_session_head:
        return
    if has_cache_marker(request):
        return
    tokens = len(ctx.current.token_ids)
    floor = minimum(ctx)
    if tokens < floor:
        return
    yield Violation(
        f"{tokens} prompt tokens (minimum {floor}) and no cache_control marker: Anthropic"
        " caches nothing for this session",
        request.source_path("messages[0]"),
        token_position=0,
        claims="none",
        fix_title="add a top-level cache_control, or a marker on the last stable block",
    )
