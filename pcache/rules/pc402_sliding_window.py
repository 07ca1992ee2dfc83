r"""## What it does
Reported where a request's cached prefix ends because the oldest messages of the conversation
were dropped (the history window slid).

## Why is this bad?
Dropping the head changes the token right after the system prompt, so the whole conversation is
prefilled again on every request that slides. Drop history in large strides (e.g. 16 messages at
once) or compact rarely, so that most requests extend the previous one.

## Example
```json
[
  {"session_id": "s1", "messages": [
    {"role": "system", "content": "Chat bot."},
    {"role": "user", "content": "one"}, {"role": "assistant", "content": "1"},
    {"role": "user", "content": "two"}, {"role": "assistant", "content": "2"},
    {"role": "user", "content": "three"}]},
  {"session_id": "s1", "messages": [
    {"role": "system", "content": "Chat bot."},
    {"role": "user", "content": "two"}, {"role": "assistant", "content": "2"},
    {"role": "user", "content": "three"}, {"role": "assistant", "content": "3"},
    {"role": "user", "content": "four"}]}
]
```

Use instead:
```json
[
  {"session_id": "s1", "messages": [
    {"role": "system", "content": "Chat bot."},
    {"role": "user", "content": "one"}, {"role": "assistant", "content": "1"},
    {"role": "user", "content": "two"}, {"role": "assistant", "content": "2"},
    {"role": "user", "content": "three"}]},
  {"session_id": "s1", "messages": [
    {"role": "system", "content": "Chat bot."},
    {"role": "user", "content": "one"}, {"role": "assistant", "content": "1"},
    {"role": "user", "content": "two"}, {"role": "assistant", "content": "2"},
    {"role": "user", "content": "three"}, {"role": "assistant", "content": "3"},
    {"role": "user", "content": "four"}]}
]
```
"""

from __future__ import annotations

from pcache.rules.base import Rule

RULE = Rule(
    code="PC402",
    name="sliding-window",
    severity="error",
    summary="The oldest messages are dropped so the history window slides",
)
CAUSES = ("history_truncated",)
"""Reported where a request's cached prefix ends at this cause (`pcache.divergence`)."""
