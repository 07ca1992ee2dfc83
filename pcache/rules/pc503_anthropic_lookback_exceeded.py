r"""## What it does
Anthropic Messages bodies, and Bedrock Converse bodies of Claude models. Counts cache block
positions (each tool, system block and message content block; a Bedrock `cachePoint` marks the
block before it) and checks, for each request of a session, that one of its `cache_control`
breakpoints (or cachePoints) lies within 20 blocks after the last breakpoint the previous
request wrote. When every breakpoint is further away, the previous write cannot be found.
(Bedrock's figure, ~20 preceding blocks for Claude models, is the `bedrock` profile's
`lookback_blocks`; other Bedrock models are not checked: no lookback is documented for them.)

## Why is this bad?
A read walks back at most 20 block positions from each breakpoint looking for an earlier write.
A turn that appends more than 20 blocks (many parallel tool calls and results) misses the cache
and writes the whole conversation again.

## Example
```json
[
  {"session_id": "s1", "model": "claude-sonnet-4-6", "max_tokens": 64, "messages": [
    {"role": "user", "content": [{"type": "text", "text": "Check all hosts",
                                  "cache_control": {"type": "ephemeral"}}]}]},
  {"session_id": "s1", "model": "claude-sonnet-4-6", "max_tokens": 64, "messages": [
    {"role": "user", "content": [{"type": "text", "text": "Check all hosts"}]},
    {"role": "assistant", "content": [
      {"type": "tool_use", "id": "t1", "name": "ping", "input": {"h": 1}},
      {"type": "tool_use", "id": "t2", "name": "ping", "input": {"h": 2}},
      {"type": "tool_use", "id": "t3", "name": "ping", "input": {"h": 3}},
      {"type": "tool_use", "id": "t4", "name": "ping", "input": {"h": 4}},
      {"type": "tool_use", "id": "t5", "name": "ping", "input": {"h": 5}},
      {"type": "tool_use", "id": "t6", "name": "ping", "input": {"h": 6}},
      {"type": "tool_use", "id": "t7", "name": "ping", "input": {"h": 7}},
      {"type": "tool_use", "id": "t8", "name": "ping", "input": {"h": 8}},
      {"type": "tool_use", "id": "t9", "name": "ping", "input": {"h": 9}},
      {"type": "tool_use", "id": "t10", "name": "ping", "input": {"h": 10}},
      {"type": "tool_use", "id": "t11", "name": "ping", "input": {"h": 11}}]},
    {"role": "user", "content": [
      {"type": "tool_result", "tool_use_id": "t1", "content": "up"},
      {"type": "tool_result", "tool_use_id": "t2", "content": "up"},
      {"type": "tool_result", "tool_use_id": "t3", "content": "up"},
      {"type": "tool_result", "tool_use_id": "t4", "content": "up"},
      {"type": "tool_result", "tool_use_id": "t5", "content": "up"},
      {"type": "tool_result", "tool_use_id": "t6", "content": "up"},
      {"type": "tool_result", "tool_use_id": "t7", "content": "up"},
      {"type": "tool_result", "tool_use_id": "t8", "content": "up"},
      {"type": "tool_result", "tool_use_id": "t9", "content": "up"},
      {"type": "tool_result", "tool_use_id": "t10", "content": "up"},
      {"type": "tool_result", "tool_use_id": "t11", "content": "down",
       "cache_control": {"type": "ephemeral"}}]}]}
]
```

Use instead:
```json
[
  {"session_id": "s1", "model": "claude-sonnet-4-6", "max_tokens": 64, "messages": [
    {"role": "user", "content": [{"type": "text", "text": "Check all hosts",
                                  "cache_control": {"type": "ephemeral"}}]}]},
  {"session_id": "s1", "model": "claude-sonnet-4-6", "max_tokens": 64, "messages": [
    {"role": "user", "content": [{"type": "text", "text": "Check all hosts",
                                  "cache_control": {"type": "ephemeral"}}]},
    {"role": "assistant", "content": [
      {"type": "tool_use", "id": "t1", "name": "ping", "input": {"h": 1}},
      {"type": "tool_use", "id": "t2", "name": "ping", "input": {"h": 2}}]},
    {"role": "user", "content": [
      {"type": "tool_result", "tool_use_id": "t1", "content": "up"},
      {"type": "tool_result", "tool_use_id": "t2", "content": "up",
       "cache_control": {"type": "ephemeral"}}]}]}
]
```
Add a second, rolling breakpoint so that no more than 20 blocks separate two writes.
"""

from __future__ import annotations

from collections.abc import Iterator

from pcache.cache.profiles import profile_data
from pcache.prompt.shapes.request import KIND_ANTHROPIC, Request
from pcache.rules.base import Rule, Violation
from pcache.rules.cache_points import bedrock_lookback, checkpoint_blocks, is_bedrock
from pcache.rules.context import LintContext
from pcache.rules.slots import content_blocks, raw_path

RULE = Rule(
    code="PC503",
    name="anthropic-lookback-exceeded",
    severity="warning",
    summary="A breakpoint (or Bedrock cachePoint) is more than 20 blocks after the previous"
    " request's cache write",
)


def lookback() -> int:
    return profile_data()["profiles"]["anthropic"]["lookback_blocks"]["value"]


def breakpoint_positions(request: Request) -> tuple[list[str], list[int]]:
    blocks = content_blocks(request)
    where = {path: position for position, path in enumerate(blocks)}
    positions = sorted(where[path] for path in request.breakpoints if path in where)
    if isinstance(request.raw.get("cache_control"), dict) and blocks:
        positions.append(len(blocks) - 1)  # automatic mode: the last block
    return blocks, positions


def check(ctx: LintContext) -> Iterator[Violation]:
    if ctx.previous is None:
        return
    request, previous = ctx.current.request, ctx.previous.request
    if is_bedrock(request) and is_bedrock(previous):
        window = bedrock_lookback(request)
        if window is None:
            return
        old_blocks, old_points = checkpoint_blocks(previous)
        blocks, points = checkpoint_blocks(request)
        written = [position for position, _ in old_points]
        reads = [position for position, _ in points]
        marker_of = {position: path for position, path in points}
        noun = "cachePoint"
    elif request.kind == KIND_ANTHROPIC and previous.kind == KIND_ANTHROPIC:
        old_blocks, written = breakpoint_positions(previous)
        blocks, reads = breakpoint_positions(request)
        window, marker_of, noun = lookback(), {}, "breakpoint"
    else:
        return
    if not written or not reads or blocks[: len(old_blocks)] != old_blocks:
        return
    if not _same_text(previous, request):
        return  # the history changed: other rules report it
    last = max(written)
    if any(last <= position < last + window for position in reads):
        return
    beyond = min((p for p in reads if p >= last), default=None)
    if beyond is None:
        return
    hits = [p for p in reads if any(q <= p < q + window for q in written)]
    resume = _token_after(ctx, blocks, max(hits)) if hits else 0
    yield Violation(
        f"the {noun} at block {beyond} is {beyond - last} blocks after the previous"
        f" request's cache write (block {last}); a read looks back only {window} blocks,"
        " so this request misses and writes again",
        raw_path(request, marker_of.get(beyond, blocks[beyond])),
        token_position=resume,
        fix_title=f"add a rolling breakpoint so writes are at most {window} blocks apart",
    )


def _token_after(ctx: LintContext, blocks: list[str], position: int) -> int:
    """First token after block `position` (an earlier breakpoint that still reads): from
    there on the request is written again."""
    if position + 1 >= len(blocks):
        return len(ctx.current.token_ids)
    path = raw_path(ctx.current.request, blocks[position + 1])
    found = ctx.current.token_of_path(path)
    if found is None:  # a block rendered under its message's path
        found = ctx.current.token_of_path(path.split(".content[")[0])
    return found or 0


def _same_text(previous: Request, request: Request) -> bool:
    """Earlier messages unchanged apart from where the markers are."""
    old, new = previous.messages, request.messages
    return new[: len(old)] == old
