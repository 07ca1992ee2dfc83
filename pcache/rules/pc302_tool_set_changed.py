r"""## What it does
Reported where a request's cached prefix ends in the tools because tools were added or removed
since the earlier request (of the session, or of another session sending the same system
prompt).

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

from pcache.rules.base import Rule

RULE = Rule(
    code="PC302",
    name="tool-set-changed",
    severity="error",
    summary="Tools were added or removed between requests of a session",
)
CAUSES = ("tool_set",)
"""Reported where a request's cached prefix ends at this cause (`pcache.divergence`)."""
