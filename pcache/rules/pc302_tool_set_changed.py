r"""## What it does
Compares the tool names of consecutive requests of a session. Tools added or removed between two
requests (a per-request tool selection, tools promoted mid-session) are reported.

## Why is this bad?
The tools array is rendered ahead of the system prompt and the history. Any change to it changes
the prefix from that tool on, so the whole conversation is prefilled again on that request.

## Example
```json
[
  {"session_id": "s1", "tools": [
    {"type": "function", "function": {"name": "read_file", "parameters": {"type": "object"}}}],
   "messages": [{"role": "user", "content": "Fix the test"}]},
  {"session_id": "s1", "tools": [
    {"type": "function", "function": {"name": "read_file", "parameters": {"type": "object"}}},
    {"type": "function", "function": {"name": "run_tests", "parameters": {"type": "object"}}}],
   "messages": [{"role": "user", "content": "Fix the test"},
    {"role": "assistant", "content": "Reading."}, {"role": "user", "content": "Run them"}]}
]
```

Use instead:
```json
[
  {"session_id": "s1", "tools": [
    {"type": "function", "function": {"name": "read_file", "parameters": {"type": "object"}}},
    {"type": "function", "function": {"name": "run_tests", "parameters": {"type": "object"}}}],
   "tool_choice": {"type": "allowed_tools", "mode": "auto",
                   "tools": [{"type": "function", "name": "read_file"}]},
   "messages": [{"role": "user", "content": "Fix the test"}]},
  {"session_id": "s1", "tools": [
    {"type": "function", "function": {"name": "read_file", "parameters": {"type": "object"}}},
    {"type": "function", "function": {"name": "run_tests", "parameters": {"type": "object"}}}],
   "messages": [{"role": "user", "content": "Fix the test"},
    {"role": "assistant", "content": "Reading."}, {"role": "user", "content": "Run them"}]}
]
```
Send the full toolkit every time and restrict it with `tool_choice`/`allowed_tools` (OpenAI) or
`defer_loading` and tool search (Anthropic).
"""

from __future__ import annotations

from collections.abc import Iterator

from pcache.prompt.request import tool_names
from pcache.rules.base import Rule, Violation
from pcache.rules.context import LintContext

RULE = Rule(
    code="PC302",
    name="tool-set-changed",
    severity="error",
    summary="Tools were added or removed between requests of a session",
)


def check(ctx: LintContext) -> Iterator[Violation]:
    if ctx.previous is None:
        return
    request = ctx.current.request
    old, new = tool_names(ctx.previous.request), tool_names(request)
    if set(old) == set(new):
        return
    added = [name for name in new if name not in old]
    removed = [name for name in old if name not in new]
    first = next((i for i, (a, b) in enumerate(zip(old, new, strict=False)) if a != b), None)
    first = min(len(old), len(new)) if first is None else first
    parts = []
    if added:
        parts.append("added " + ", ".join(map(repr, added)))
    if removed:
        parts.append("removed " + ", ".join(map(repr, removed)))
    path = f"tools[{first}]" if first < len(new) else ("tools" if new else "")
    yield Violation(
        f"tool set changed since the previous request ({'; '.join(parts)})",
        request.source_path(path) if path else "tools",
        fix_title="send the full toolkit; restrict with tool_choice/allowed_tools",
    )
