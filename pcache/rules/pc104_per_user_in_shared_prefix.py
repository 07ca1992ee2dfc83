r"""## What it does
Compares the system prompt and tool definitions of sessions that belong to different users (or
different sessions without a user). When the same place holds a different value (a name, an
email address, a path, a memory) and the rest is shared, the per-user part is reported.

## Why is this bad?
Everything after the first per-user character is unique to that user, so the long shared part
behind it (instructions, tools) is prefilled again for every user and every session.

## Example
```json
[
  {"user": "u-alice", "messages": [
    {"role": "system",
     "content": "You talk to Alice Moreau. Be concise, cite order numbers, promise no refunds."},
    {"role": "user", "content": "Where is my order?"}]},
  {"user": "u-bob", "messages": [
    {"role": "system",
     "content": "You talk to Bob Lindqvist. Be concise, cite order numbers, promise no refunds."},
    {"role": "user", "content": "Cancel my plan"}]}
]
```

Use instead:
```json
[
  {"user": "u-alice", "messages": [
    {"role": "system", "content": "Be concise, cite order numbers, promise no refunds."},
    {"role": "user", "content": "(customer: Alice Moreau) Where is my order?"}]},
  {"user": "u-bob", "messages": [
    {"role": "system", "content": "Be concise, cite order numbers, promise no refunds."},
    {"role": "user", "content": "(customer: Bob Lindqvist) Cancel my plan"}]}
]
```
Put personal data in the first or last user turn, or behind a tool.
"""

from __future__ import annotations

from collections.abc import Iterator

from pcache.rules.base import Rule, Violation
from pcache.rules.context import LintContext
from pcache.rules.patterns import (
    CLOCK,
    DATE,
    RANDOM_ID,
    changed_windows,
    normalize_whitespace,
    short,
    widen,
)

RULE = Rule(
    code="PC104",
    name="per-user-in-shared-prefix",
    severity="error",
    summary="Per-user data in the system prompt or tools splits the shared prefix by user",
)


def _explained_elsewhere(old: str, new: str) -> bool:
    """Clock values, random ids and whitespace have their own rules."""
    if normalize_whitespace(old) == normalize_whitespace(new):
        return True
    return any(p.search(t) for p in (CLOCK, DATE, RANDOM_ID) for t in (old, new))


def check(ctx: LintContext) -> Iterator[Violation]:
    if not ctx.is_session_head:
        return
    current = ctx.current
    identity = current.identity
    for head in ctx.app.other_heads(current.session):
        if identity and head.identity == identity:
            continue
        before = head.context.slot_map()
        for slot, path, text in current.prefix_slots:
            if slot not in before or before[slot][1] == text:
                continue
            old_text = before[slot][1]
            start, old, new = changed_windows(old_text, text)
            after = len(text) - start - len(new)
            if not new.strip() or len(new) > 400:
                continue  # nothing personal here, or a different prompt altogether
            if after < max(40, 0.25 * len(text)):
                continue  # nothing shared follows: the prefix before it is still shared
            if _explained_elsewhere(
                widen(old_text, start, start + len(old), 8), widen(text, start, start + len(new), 8)
            ):
                continue
            who = f"user {head.identity!r}" if head.identity else "another session"
            yield Violation(
                f"per-user value in the shared prefix: {short(new)} here, {short(old)} for {who};"
                f" the {after} shared characters after it are prefilled again per user",
                current.request.source_path(path),
                offset=start,
                fix_title="move personal data to a user turn or behind a tool",
            )
            return
        return  # compare with the most recent other session only
