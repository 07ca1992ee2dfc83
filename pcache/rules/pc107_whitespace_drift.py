r"""## What it does
Reported where a request's cached prefix ends at text that differs from the earlier request only
in whitespace, line endings or Unicode normalization (system prompt, tools or history).

## Why is this bad?
The difference is invisible, but a tokenizer sees it: the tokens change from that character on
and the cache stops there. Normalize text once, when it is first stored.

## Example
```json
[
  {"session_id": "s1", "messages": [
    {"role": "system", "content": "You are a careful assistant.\nAnswer in English."},
    {"role": "user", "content": "Hi"}]},
  {"session_id": "s1", "messages": [
    {"role": "system", "content": "You are a careful assistant.\r\nAnswer in English.\n"},
    {"role": "user", "content": "Hi"},
    {"role": "assistant", "content": "Hello"},
    {"role": "user", "content": "Bye"}]}
]
```

Use instead:
```json
[
  {"session_id": "s1", "messages": [
    {"role": "system", "content": "You are a careful assistant.\nAnswer in English."},
    {"role": "user", "content": "Hi"}]},
  {"session_id": "s1", "messages": [
    {"role": "system", "content": "You are a careful assistant.\nAnswer in English."},
    {"role": "user", "content": "Hi"},
    {"role": "assistant", "content": "Hello"},
    {"role": "user", "content": "Bye"}]}
]
```
"""

from __future__ import annotations

from pcache.rules.base import Rule

RULE = Rule(
    code="PC107",
    name="whitespace-drift",
    severity="error",
    summary="Text differs from the previous request only in whitespace or Unicode form",
)
CAUSES = ("whitespace",)
"""Reported where a request's cached prefix ends at this cause (`pcache.divergence`)."""
