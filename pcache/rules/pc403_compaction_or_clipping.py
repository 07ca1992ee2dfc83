r"""## What it does
Compares the history of consecutive requests of a session and reports two ways of shrinking it:
compaction (several earlier messages replaced by one, typically a summary) and clipping (an
earlier message, typically a tool output, shortened in place). The message says how many
messages were collapsed.

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

from collections.abc import Iterator

from pcache.rules.base import Rule, Violation
from pcache.rules.context import LintContext
from pcache.rules.history import compare_history

RULE = Rule(
    code="PC403",
    name="compaction-or-clipping",
    severity="warning",
    summary="Earlier messages were summarized or clipped",
)


def check(ctx: LintContext) -> Iterator[Violation]:
    if ctx.previous is None:
        return
    change = compare_history(ctx)
    if change.kind not in ("compaction", "clipping"):
        return
    role = ctx.previous.messages[change.index]["role"]
    if change.kind == "compaction":
        message = (
            f"history compacted: {change.dropped} messages from message {change.index} on were"
            " replaced by one; everything after it is prefilled again"
        )
    else:
        message = (
            f"message {change.index} ({role}) was clipped since the previous request; everything"
            " after it is prefilled again"
        )
    yield Violation(
        message,
        ctx.current.source_path(f"messages[{change.index}]"),
        fix_title="clip outputs once when first added; compact rarely, in large steps",
    )
