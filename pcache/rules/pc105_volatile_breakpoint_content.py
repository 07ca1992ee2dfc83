r"""## What it does
Compares the blocks that carry an Anthropic `cache_control` marker in the tools and the system
prompt with the same blocks of the previous request of the session (or, for a session's first
request, of the latest other session). A marked block whose content changed is reported.
In a Bedrock Converse body the marker is a `cachePoint` block of its own: the block compared
is the one just before a `cachePoint` in `system` (a tool that changes before a checkpoint is
reported by PC301-PC303 already). Other shapes carry no such markers.

## Why is this bad?
A breakpoint writes the prefix up to and including its block. When that block differs on every
request, every request pays the cache write (1.25x input) and no later request can read it.

## Example
```json
[
  {"session_id": "s1", "model": "claude-sonnet-4-6", "max_tokens": 64,
   "system": [{"type": "text", "text": "You are a support agent for Acme."},
              {"type": "text", "text": "Open tickets: 41",
               "cache_control": {"type": "ephemeral"}}],
   "messages": [{"role": "user", "content": "Hi"}]},
  {"session_id": "s1", "model": "claude-sonnet-4-6", "max_tokens": 64,
   "system": [{"type": "text", "text": "You are a support agent for Acme."},
              {"type": "text", "text": "Open tickets: 42",
               "cache_control": {"type": "ephemeral"}}],
   "messages": [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello"},
                {"role": "user", "content": "Status?"}]}
]
```

Use instead:
```json
[
  {"session_id": "s1", "model": "claude-sonnet-4-6", "max_tokens": 64,
   "system": [{"type": "text", "text": "You are a support agent for Acme.",
               "cache_control": {"type": "ephemeral"}},
              {"type": "text", "text": "Open tickets: 41"}],
   "messages": [{"role": "user", "content": "Hi"}]},
  {"session_id": "s1", "model": "claude-sonnet-4-6", "max_tokens": 64,
   "system": [{"type": "text", "text": "You are a support agent for Acme.",
               "cache_control": {"type": "ephemeral"}},
              {"type": "text", "text": "Open tickets: 42"}],
   "messages": [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello"},
                {"role": "user", "content": "Status?"}]}
]
```
Put the marker on the last block that stays the same; move changing values after it.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from pcache.prompt.shapes.request import KIND_ANTHROPIC, KIND_BEDROCK, Request
from pcache.rules.base import Rule, Violation
from pcache.rules.cache_points import cached_block, is_bedrock
from pcache.rules.context import LintContext
from pcache.rules.slots import exact, raw_path, resolve

RULE = Rule(
    code="PC105",
    name="volatile-breakpoint-content",
    severity="error",
    summary="A block carrying a cache breakpoint changes between requests",
)


def _without_marker(block: Any) -> Any:
    if isinstance(block, dict):
        return {key: value for key, value in block.items() if key != "cache_control"}
    return block


def check(ctx: LintContext) -> Iterator[Violation]:
    request = ctx.current.request
    if request.kind not in (KIND_ANTHROPIC, KIND_BEDROCK) or not request.breakpoints:
        return
    if ctx.previous is not None:
        where, other = "the previous request", ctx.previous.request
    else:
        heads = ctx.app.other_heads(ctx.current.session)[:1]
        if not heads:
            return
        where, other = f"session {heads[0].session}", heads[0].context.request
    if other.kind != request.kind:
        return
    if is_bedrock(request):
        yield from _bedrock(request, other, where)
        return
    for path in request.breakpoints:
        if not path.startswith(("tools[", "system[")) or path not in other.breakpoints:
            continue
        new, old = resolve(request.raw, path), resolve(other.raw, path)
        if old is None or exact(_without_marker(old)) == exact(_without_marker(new)):
            continue
        yield Violation(
            f"the block marked with cache_control differs from {where}: the write at this"
            " breakpoint is never read again",
            raw_path(request, path),
            fix_title="put the marker on the last block that stays the same",
        )


def _bedrock(request: Request, other: Request, where: str) -> Iterator[Violation]:
    for path in request.breakpoints:
        if not path.startswith("system[") or path not in other.breakpoints:
            continue  # a tool changed before a checkpoint is PC301-PC303's finding
        closed = cached_block(request, path)
        if closed is None:
            continue
        block_path, new = closed
        old = resolve(other.raw, block_path)
        if old is None or exact(old) == exact(new):
            continue
        yield Violation(
            f"the block before the cachePoint at {path} differs from {where}: the checkpoint"
            " written there is never read again",
            raw_path(request, block_path),
            fix_title="put the cachePoint after the last block that stays the same",
        )
