r"""## What it does
Reported where a request's cached prefix ends because earlier messages were compacted (several
replaced by one, typically a summary) or clipped (a message, typically a tool output, shortened
in place).

## Why is this bad?
Everything after the first compacted or clipped message is prefilled again. Done once in a long
session this is a fair trade; done every few turns it costs more than it saves.

## Example
```json
[
  {"session_id": "s1", "messages": [
    {"role": "system", "content": "You are a coding agent."},
    {"role": "user", "content": "Read the log"},
    {"role": "assistant", "content": "Reading it."},
    {"role": "tool", "content": "line 1: ok\nline 2: ok\nline 3: error: disk full"},
    {"role": "user", "content": "What failed?"}]},
  {"session_id": "s1", "messages": [
    {"role": "system", "content": "You are a coding agent."},
    {"role": "user", "content": "Read the log"},
    {"role": "assistant", "content": "Reading it."},
    {"role": "tool", "content": "line 1: ok [truncated]"},
    {"role": "user", "content": "What failed?"},
    {"role": "assistant", "content": "The disk is full."},
    {"role": "user", "content": "Fix it"}]}
]
```

Use instead:
```json
[
  {"session_id": "s1", "messages": [
    {"role": "system", "content": "You are a coding agent."},
    {"role": "user", "content": "Read the log"},
    {"role": "assistant", "content": "Reading it."},
    {"role": "tool", "content": "line 1: ok [truncated]"},
    {"role": "user", "content": "What failed?"}]},
  {"session_id": "s1", "messages": [
    {"role": "system", "content": "You are a coding agent."},
    {"role": "user", "content": "Read the log"},
    {"role": "assistant", "content": "Reading it."},
    {"role": "tool", "content": "line 1: ok [truncated]"},
    {"role": "user", "content": "What failed?"},
    {"role": "assistant", "content": "The disk is full."},
    {"role": "user", "content": "Fix it"}]}
]
```
Clip a tool output once, when it is first added; compact at most every K turns.
"""

from __future__ import annotations

from pcache.rules.base import Rule

RULE = Rule(
    code="PC403",
    name="compaction-or-clipping",
    severity="warning",
    summary="Earlier messages were summarized or clipped",
)
CAUSES = ("compaction",)
"""Reported where a request's cached prefix ends at this cause (`pcache.divergence`)."""
