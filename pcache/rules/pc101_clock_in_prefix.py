r"""## What it does
Finds clock values (time of day, "today is ...", ISO date-times) in the part of a request that
every request sends again: system and developer messages and tool definitions. Across two
requests of a session, a date or time that changes in the same place is reported as an error.

## Why is this bad?
A cache reuses only an exact token prefix. A timestamp near the top of the system prompt changes
on every request (or every day), so everything after it is prefilled again and billed in full.
Values in tool results and user turns are not reported: they sit after the reused prefix.

## Example
```json
[
  {"session_id": "s1", "messages": [
    {"role": "system", "content": "Support agent. Current time: 2026-03-02 10:16:02 UTC."},
    {"role": "user", "content": "Where is my order?"}]},
  {"session_id": "s1", "messages": [
    {"role": "system", "content": "Support agent. Current time: 2026-03-02 10:16:40 UTC."},
    {"role": "user", "content": "Where is my order?"},
    {"role": "assistant", "content": "Let me check."},
    {"role": "user", "content": "Thanks"}]}
]
```

Use instead:
```json
[
  {"session_id": "s1", "messages": [
    {"role": "system", "content": "You are a support agent."},
    {"role": "user", "content": "Where is my order? (sent 2026-03-02 10:16:02 UTC)"}]},
  {"session_id": "s1", "messages": [
    {"role": "system", "content": "You are a support agent."},
    {"role": "user", "content": "Where is my order? (sent 2026-03-02 10:16:02 UTC)"},
    {"role": "assistant", "content": "Let me check."},
    {"role": "user", "content": "Thanks (sent 2026-03-02 10:16:40 UTC)"}]}
]
```
Move the clock to the newest user turn or to `metadata`; keep day precision if it must stay.
"""

from __future__ import annotations

from collections.abc import Iterator

from pcache.rules.base import Rule, Violation
from pcache.rules.context import LintContext
from pcache.rules.patterns import CLOCK, DATE, changed_windows, search_clock, short, widen

RULE = Rule(
    code="PC101",
    name="clock-in-prefix",
    severity="error",
    summary="A date or time in the system prompt or tools changes the cached prefix",
    fix_availability="none",
)
FIX = "move the clock value to the newest user turn or to `metadata`"


def _is_clock(text: str) -> bool:
    return bool(CLOCK.search(text) or DATE.search(text))


def check(ctx: LintContext) -> Iterator[Violation]:
    request = ctx.current.request
    before = ctx.previous.slot_map() if ctx.previous else None
    for slot, path, text in ctx.current.prefix_slots:
        if before is not None:
            if slot not in before or before[slot][1] == text:
                continue  # same value as the previous request: no break here
            old_text = before[slot][1]
            start, old, new = changed_windows(old_text, text)
            if _is_clock(widen(text, start, start + len(new), 20)) and _is_clock(
                widen(old_text, start, start + len(old), 20)
            ):
                yield Violation(
                    f"clock value in the cached prefix changes between requests"
                    f" ({short(widen(old_text, start, start + len(old), 6))} ->"
                    f" {short(widen(text, start, start + len(new), 6))})",
                    request.source_path(path),
                    offset=start,
                    fix_title=FIX,
                )
            continue
        match = search_clock(text)
        if match:
            yield Violation(
                f"clock value {short(match[1])} in the cached prefix: it changes the prefix"
                " whenever it changes",
                request.source_path(path),
                offset=match[0],
                severity="warning",
                fix_title=FIX,
                hint=True,
            )
