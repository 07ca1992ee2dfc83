r"""## What it does
Detects a history window that slides: the oldest messages after the system prompt are dropped so
that the rest moves up, request after request.

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

from collections.abc import Iterator

from pcache.rules.base import Rule, Violation
from pcache.rules.context import LintContext
from pcache.rules.history import compare_history

RULE = Rule(
    code="PC402",
    name="sliding-window",
    severity="error",
    summary="The oldest messages are dropped so the history window slides",
)


def check(ctx: LintContext) -> Iterator[Violation]:
    if ctx.previous is None:
        return
    change = compare_history(ctx)
    if change.kind != "window":
        return
    yield Violation(
        f"history window slid: the {change.dropped} oldest message(s) after the system prompt"
        " were dropped, so everything after the system prompt is prefilled again",
        ctx.current.request.source_path(f"messages[{change.index}]"),
        fix_title="drop history in large strides, or compact rarely",
    )
