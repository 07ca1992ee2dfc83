r"""## What it does
Reported where a request's cached prefix ends because a system or developer message after the
first turn was moved, replaced or removed (a per-turn reminder re-injected before the newest
user message).

## Why is this bad?
The injected message sits in the middle of the conversation. Moving or rewriting it each turn
changes the prefix from its old position on, and many chat templates also hoist or merge
system messages, which changes the render of what follows.

## Example
```json
[
  {"session_id": "s1", "messages": [
    {"role": "system", "content": "You are a helpful assistant."},
    {"role": "user", "content": "Plan a trip"},
    {"role": "system", "content": "Reminder: answer in French."},
    {"role": "user", "content": "To Rome"}]},
  {"session_id": "s1", "messages": [
    {"role": "system", "content": "You are a helpful assistant."},
    {"role": "user", "content": "Plan a trip"},
    {"role": "user", "content": "To Rome"},
    {"role": "assistant", "content": "Voici un plan."},
    {"role": "system", "content": "Reminder: answer in French."},
    {"role": "user", "content": "Cheaper?"}]}
]
```

Use instead:
```json
[
  {"session_id": "s1", "messages": [
    {"role": "system", "content": "You are a helpful assistant. Answer in French."},
    {"role": "user", "content": "Plan a trip"},
    {"role": "user", "content": "To Rome"}]},
  {"session_id": "s1", "messages": [
    {"role": "system", "content": "You are a helpful assistant. Answer in French."},
    {"role": "user", "content": "Plan a trip"},
    {"role": "user", "content": "To Rome"},
    {"role": "assistant", "content": "Voici un plan."},
    {"role": "user", "content": "Cheaper?"}]}
]
```
Keep one static system prompt; put per-turn guidance in the newest user turn.
"""

from __future__ import annotations

from pcache.rules.base import Rule

RULE = Rule(
    code="PC406",
    name="system-message-mid-history",
    severity="warning",
    summary="System messages are injected or moved between turns",
)
CAUSES = ("system_message_moved",)
"""Reported where a request's cached prefix ends at this cause (`pcache.divergence`)."""
