r"""## What it does
Looks at tool names that carry an MCP server prefix (`mcp__github__create_issue`,
`github__create_issue`). When the tools of one server are not sorted by name, the list was most
likely taken in the order the server returned it. A hint (info), reported once per tool list.
Opt-in (`--extend-select PC305`): an opinion, not an observed break.

## Why is this bad?
MCP `tools/list` order is not guaranteed: servers built on hash maps, reconnects and restarts
return another order, and the tools array is the first thing in the prompt. Sorting each server's
tools by name makes the array stable whatever the server does.

## Example
```json
{"tools": [
  {"type": "function", "function": {"name": "mcp__github__list_issues", "parameters": {}}},
  {"type": "function", "function": {"name": "mcp__github__create_issue", "parameters": {}}}],
 "messages": [{"role": "user", "content": "File a bug"}]}
```

Use instead:
```json
{"tools": [
  {"type": "function", "function": {"name": "mcp__github__create_issue", "parameters": {}}},
  {"type": "function", "function": {"name": "mcp__github__list_issues", "parameters": {}}}],
 "messages": [{"role": "user", "content": "File a bug"}]}
```
Sort the tools of each MCP server by name after `tools/list` (and after every reconnect).
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from pcache.prompt.shapes.request import tool_names
from pcache.rules.base import Rule, Violation
from pcache.rules.context import LintContext
from pcache.text.redaction import quote

RULE = Rule(
    code="PC305",
    name="mcp-nondeterminism-hint",
    severity="info",
    summary="MCP tools are not sorted within their server",
    default=False,
)

SERVER = re.compile(r"^(?:mcp__)?([A-Za-z0-9-]+(?:_[A-Za-z0-9-]+)*?)__[A-Za-z0-9]")


def unsorted_server(names: list[str]) -> tuple[str, int] | None:
    """(server, index of its first tool out of order) for the first MCP server whose tools are
    not sorted by name."""
    groups: dict[str, list[tuple[int, str]]] = {}
    for index, name in enumerate(names):
        match = SERVER.match(name)
        if match:
            groups.setdefault(match.group(1), []).append((index, name))
    for server, members in groups.items():
        ordered = [name for _, name in members]
        if len(members) >= 2 and ordered != sorted(ordered):
            first = next(i for (i, a), b in zip(members, sorted(ordered), strict=True) if a != b)
            return server, first
    return None


def check(ctx: LintContext) -> Iterator[Violation]:
    request = ctx.current.request
    names = tool_names(request)
    found = unsorted_server(names)
    if found is None or not ctx.app.once(("PC305", tuple(names))):
        return
    server, first = found
    yield Violation(
        f"tools of MCP server {quote(server)} are not sorted by name: the order the server"
        " returned may change on the next connection",
        request.source_path(f"tools[{first}]"),
        claims="none",
        fix_title="sort each MCP server's tools by name",
    )
