r"""## What it does
Anthropic Messages bodies only. Compares the request parameters that Anthropic's cache depends on
between consecutive requests of a session: `model`, `tool_choice`, `thinking`,
`output_config` (effort), `speed`, the web search tool and citations. The message names the
cache levels the change invalidates (tools, system, messages), per Anthropic's table.

## Why is this bad?
These parameters are part of the cache key even though they are not text: `tool_choice` or
thinking changes invalidate the cached messages; web search, citations or speed changes also
the system prompt; a model switch starts from an empty cache.

## Example
```json
[
  {"session_id": "s1", "model": "claude-sonnet-4-6", "max_tokens": 64,
   "system": "You are a debugging agent.", "tool_choice": {"type": "auto"},
   "messages": [{"role": "user", "content": "Find the bug"}]},
  {"session_id": "s1", "model": "claude-sonnet-4-6", "max_tokens": 64,
   "system": "You are a debugging agent.", "tool_choice": {"type": "any"},
   "messages": [{"role": "user", "content": "Find the bug"},
                {"role": "assistant", "content": "Looking."},
                {"role": "user", "content": "Use a tool"}]}
]
```

Use instead:
```json
[
  {"session_id": "s1", "model": "claude-sonnet-4-6", "max_tokens": 64,
   "system": "You are a debugging agent.", "tool_choice": {"type": "auto"},
   "messages": [{"role": "user", "content": "Find the bug"}]},
  {"session_id": "s1", "model": "claude-sonnet-4-6", "max_tokens": 64,
   "system": "You are a debugging agent.", "tool_choice": {"type": "auto"},
   "messages": [{"role": "user", "content": "Find the bug"},
                {"role": "assistant", "content": "Looking."},
                {"role": "user", "content": "Use a tool"}]}
]
```
Keep these parameters fixed for a session; change them at session boundaries.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from pcache.prompt.shapes.request import KIND_ANTHROPIC, Request
from pcache.rules.base import Rule, Violation
from pcache.rules.context import LintContext
from pcache.rules.slots import exact, raw_path

RULE = Rule(
    code="PC505",
    name="anthropic-param-change",
    severity="warning",
    summary="A parameter that is part of Anthropic's cache changed within a session",
)

LEVELS = {
    "model": "everything (caches are per model)",
    "speed": "the system prompt and messages",
    "web_search": "the system prompt and messages",
    "citations": "the system prompt and messages",
    "tool_choice": "the messages",
    "thinking": "the messages",
    "output_config": "the messages",
}


def _citations(raw: dict[str, Any]) -> bool:
    for message in raw.get("messages") or []:
        for block in message.get("content") or [] if isinstance(message, dict) else []:
            citations = block.get("citations") if isinstance(block, dict) else None
            if isinstance(citations, dict) and citations.get("enabled"):
                return True
    return False


def _parameters(request: Request) -> dict[str, bytes]:
    raw = request.raw
    values = {key: exact(raw.get(key)) for key in LEVELS if key in raw}
    values.setdefault("model", exact(raw.get("model")))
    search = any(
        isinstance(tool, dict) and str(tool.get("type", "")).startswith("web_search")
        for tool in raw.get("tools") or []
    )
    values["web_search"] = exact(search)
    values["citations"] = exact(_citations(raw))
    return values


def check(ctx: LintContext) -> Iterator[Violation]:
    if ctx.previous is None:
        return
    request, previous = ctx.current.request, ctx.previous.request
    if request.kind != KIND_ANTHROPIC or previous.kind != KIND_ANTHROPIC:
        return
    old, new = _parameters(previous), _parameters(request)
    changed = [key for key in LEVELS if old.get(key) != new.get(key)]
    if not changed:
        return
    key = changed[0]
    level = LEVELS[key]
    if level == "the messages":
        position = ctx.current.tokens_before_message(ctx.current.first_turn_index)
    elif level.startswith("the system"):
        position = ctx.current.tokens_before_message(0) if request.tools else 0
    else:
        position = 0
    path = key if key in request.raw else ("tools" if key == "web_search" else "messages")
    yield Violation(
        f"{', '.join(changed)} changed since the previous request: this invalidates {level}",
        raw_path(request, path),
        token_position=position,
        fix_title="keep these parameters fixed within a session",
    )
