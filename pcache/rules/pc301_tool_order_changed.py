r"""## What it does
Reported where a request's cached prefix ends in the tools because the same tools are sent in
another order than in the earlier request (of the session or of another session of the app).
One request alone: tools not sorted by name are a hint (fixable with `--fix`).

## Why is this bad?
Tools are rendered first. MCP `tools/list`, hash maps and reconnects return tools in a varying
order, and each order is a different prefix: the whole prompt is prefilled again.

## Example
```json
[
  {"session_id": "s1", "tools": [
    {"type": "function", "function": {"name": "read_file", "parameters": {"type": "object"}}},
    {"type": "function", "function": {"name": "search", "parameters": {"type": "object"}}}],
   "messages": [{"role": "user", "content": "Find the bug"}]},
  {"session_id": "s1", "tools": [
    {"type": "function", "function": {"name": "search", "parameters": {"type": "object"}}},
    {"type": "function", "function": {"name": "read_file", "parameters": {"type": "object"}}}],
   "messages": [{"role": "user", "content": "Find the bug"},
    {"role": "assistant", "content": "Looking."}, {"role": "user", "content": "Go on"}]}
]
```

Use instead:
```json
[
  {"session_id": "s1", "tools": [
    {"type": "function", "function": {"name": "read_file", "parameters": {"type": "object"}}},
    {"type": "function", "function": {"name": "search", "parameters": {"type": "object"}}}],
   "messages": [{"role": "user", "content": "Find the bug"}]},
  {"session_id": "s1", "tools": [
    {"type": "function", "function": {"name": "read_file", "parameters": {"type": "object"}}},
    {"type": "function", "function": {"name": "search", "parameters": {"type": "object"}}}],
   "messages": [{"role": "user", "content": "Find the bug"},
    {"role": "assistant", "content": "Looking."}, {"role": "user", "content": "Go on"}]}
]
```
Sort tools by name (or a fixed authoring order) after merging MCP servers and after reconnects.

## Fix safety
`--fix` sorts the tools array of request files by name.
"""

from __future__ import annotations

from collections.abc import Iterator

from pcache.prompt.shapes.request import tool_names
from pcache.rules.base import Rule, Violation
from pcache.rules.context import LintContext
from pcache.rules.pc305_mcp_nondeterminism_hint import unsorted_server

RULE = Rule(
    code="PC301",
    name="tool-order-changed",
    severity="error",
    summary="The same tools are sent in a different order",
    fix_availability="sometimes",
)
CAUSES = ("tool_order",)
"""Reported where a request\'s cached prefix ends at the same tools in another order."""
FIX = "sort tools by name after merging sources"


def check(ctx: LintContext) -> Iterator[Violation]:
    """One request: tools not sorted by name (a hint, fixable)."""
    request = ctx.current.request
    names = tool_names(request)
    if len(names) < 2 or unsorted_server(names) is not None:
        return  # PC305 gives the more specific hint
    if names != sorted(names) and ctx.app.once(("PC301", tuple(names))):
        yield Violation(
            "tools are not sorted by name; an order that varies would change the prefix",
            request.source_path("tools[0]"),
            severity="info",
            hint=True,
            fix_title="sort tools by name",
            fixable=True,
        )
