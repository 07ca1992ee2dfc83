r"""## What it does
Uses the requests' `timestamp` fields: reports a request that comes longer after the previous
request of its session than the profile's cache lifetime (`ttl_seconds` in
`pcache/data/providers.json`: Anthropic 5 minutes, OpenAI in-memory 10 minutes). Profiles
without a lifetime (vllm, sglang evict by memory pressure) never report it.

## Why is this bad?
After the lifetime the cached prefix is gone and the whole conversation is written again (on
Anthropic at 1.25x the input price). Tool runs, builds and human pauses often exceed 5 minutes.

## Example
```json
[
  {"session_id": "s1", "timestamp": "2026-03-01T10:00:00Z",
   "messages": [{"role": "user", "content": "Run the test suite"}]},
  {"session_id": "s1", "timestamp": "2026-03-01T10:12:00Z",
   "messages": [{"role": "user", "content": "Run the test suite"},
                {"role": "assistant", "content": "Running."},
                {"role": "user", "content": "Results?"}]}
]
```
(with `--profile anthropic`)

Use instead:
```json
[
  {"session_id": "s1", "timestamp": "2026-03-01T10:00:00Z",
   "messages": [{"role": "user", "content": "Run the test suite"}]},
  {"session_id": "s1", "timestamp": "2026-03-01T10:03:00Z",
   "messages": [{"role": "user", "content": "Run the test suite"},
                {"role": "assistant", "content": "Running."},
                {"role": "user", "content": "Results?"}]}
]
```
(with `--profile anthropic`; or keep the gap and use 1-hour markers / 24h retention)
"""

from __future__ import annotations

from collections.abc import Iterator

from pcache.rules.base import Rule, Violation
from pcache.rules.context import LintContext

RULE = Rule(
    code="PC511",
    name="ttl-gap",
    severity="warning",
    summary="The gap between requests of a session exceeds the cache lifetime",
)


def check(ctx: LintContext) -> Iterator[Violation]:
    ttl = ctx.settings.profile.ttl_seconds
    if ctx.previous is None or ttl is None:
        return
    now, before = ctx.current.request.timestamp, ctx.previous.request.timestamp
    if now is None or before is None:
        return
    gap = (now - before) / 1000
    if gap <= ttl:
        return
    yield Violation(
        f"{gap / 60:.1f} min since the previous request of this session, longer than the"
        f" {ttl / 60:.0f}-minute cache lifetime of the {ctx.settings.profile.name} profile",
        ctx.current.request.source_path("messages[0]"),
        token_position=0,
        claims="none",
        fix_title="use 1h cache_control markers (Anthropic) or 24h retention (OpenAI)",
    )
