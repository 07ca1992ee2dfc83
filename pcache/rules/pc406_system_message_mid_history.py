r"""## What it does
Compares the history of consecutive requests of a session. Reports system or developer messages
placed after the first turn that were moved, replaced or removed since the previous request
(a per-turn reminder re-injected before the newest user message), when nothing else changed.

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

from collections.abc import Iterator

from pcache.rules.base import Rule, Violation
from pcache.rules.context import LintContext
from pcache.rules.history import compare_history

RULE = Rule(
    code="PC406",
    name="system-message-mid-history",
    severity="warning",
    summary="System messages are injected or moved between turns",
)


def check(ctx: LintContext) -> Iterator[Violation]:
    if ctx.previous is None:
        return
    change = compare_history(ctx)
    if change.kind != "system-injection":
        return
    target = min(change.index, len(ctx.current.messages) - 1)
    yield Violation(
        f"a system message after the first turn was moved or re-injected (message"
        f" {change.index} changed); everything after it is prefilled again",
        ctx.current.source_path(f"messages[{target}]"),
        fix_title="keep one static system prompt; put per-turn guidance in the user turn",
    )
