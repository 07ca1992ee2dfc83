r"""## What it does
Reported where a request's cached prefix ends inside a tool definition (its description or
parameters) that changed since the earlier request, when the change is not a clock, an id or
whitespace.

## Why is this bad?
Tool definitions sit at the start of the prompt. A changed description changes every token
after it, so the system prompt and the whole history are prefilled again.

## Example
```json
[
  {"session_id": "s1", "tools": [{"type": "function", "function": {"name": "search_docs",
    "description": "Search 1204 documents", "parameters": {"type": "object"}}}],
   "messages": [{"role": "user", "content": "Find the SLA"}]},
  {"session_id": "s1", "tools": [{"type": "function", "function": {"name": "search_docs",
    "description": "Search 1209 documents", "parameters": {"type": "object"}}}],
   "messages": [{"role": "user", "content": "Find the SLA"},
    {"role": "assistant", "content": "Searching."}, {"role": "user", "content": "Thanks"}]}
]
```

Use instead:
```json
[
  {"session_id": "s1", "tools": [{"type": "function", "function": {"name": "search_docs",
    "description": "Search the document store", "parameters": {"type": "object"}}}],
   "messages": [{"role": "user", "content": "Find the SLA"}]},
  {"session_id": "s1", "tools": [{"type": "function", "function": {"name": "search_docs",
    "description": "Search the document store", "parameters": {"type": "object"}}}],
   "messages": [{"role": "user", "content": "Find the SLA"},
    {"role": "assistant", "content": "Searching."}, {"role": "user", "content": "Thanks"}]}
]
```
Keep tool definitions static; put changing facts in tool results.
"""

from __future__ import annotations

from pcache.rules.base import Rule

RULE = Rule(
    code="PC303",
    name="tool-definition-drift",
    severity="error",
    summary="A tool's description or parameters changed between requests",
)
CAUSES = ("tool_definition",)
"""Reported where a request's cached prefix ends at this cause (`pcache.divergence`)."""
