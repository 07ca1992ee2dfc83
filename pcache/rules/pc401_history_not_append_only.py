r"""## What it does
Reported where a request's cached prefix ends at an earlier message of its conversation that
was edited, deleted, inserted or reordered since the earlier request. Replacing the newest user
turn (a retry) is not an edit.

## Why is this bad?
The cache holds the previous conversation as a token prefix. Changing message k re-prefills
message k and everything after it on every request that does it.

## Example
```json
[
  {"session_id": "s1", "messages": [
    {"role": "system", "content": "You are a coding agent."},
    {"role": "user", "content": "Add a test"},
    {"role": "assistant", "content": "I will add tests/test_parser.py with three cases."},
    {"role": "user", "content": "Go"}]},
  {"session_id": "s1", "messages": [
    {"role": "system", "content": "You are a coding agent."},
    {"role": "user", "content": "Add a test"},
    {"role": "assistant", "content": "[summary: planned a test]"},
    {"role": "user", "content": "Go"},
    {"role": "assistant", "content": "Done."},
    {"role": "user", "content": "Run it"}]}
]
```

Use instead:
```json
[
  {"session_id": "s1", "messages": [
    {"role": "system", "content": "You are a coding agent."},
    {"role": "user", "content": "Add a test"},
    {"role": "assistant", "content": "I will add tests/test_parser.py with three cases."},
    {"role": "user", "content": "Go"}]},
  {"session_id": "s1", "messages": [
    {"role": "system", "content": "You are a coding agent."},
    {"role": "user", "content": "Add a test"},
    {"role": "assistant", "content": "I will add tests/test_parser.py with three cases."},
    {"role": "user", "content": "Go"},
    {"role": "assistant", "content": "Done."},
    {"role": "user", "content": "Run it"}]}
]
```
Append only; put runtime changes in new messages; compact rarely and in large steps.
"""

from __future__ import annotations

from pcache.rules.base import Rule

RULE = Rule(
    code="PC401",
    name="history-not-append-only",
    severity="error",
    summary="Earlier messages were edited, deleted, inserted or reordered",
)
CAUSES = ("history_edit",)
"""Reported where a request's cached prefix ends at this cause (`pcache.divergence`)."""
