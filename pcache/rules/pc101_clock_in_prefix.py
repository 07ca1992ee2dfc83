r"""## What it does
Reported where a request's cached prefix (the longest prefix it shares with any earlier request,
whatever its session or user) ends at a clock value that changed: an ISO date-time, a time of
day, an HTTP date, an epoch, a date, "3 minutes ago". One request alone: a time of day in the
system or developer prompt or the tools is a warning, since it breaks the prefix as soon as the
clock moves.

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
from pcache.rules.patterns import short
from pcache.text.patterns import search_clock

RULE = Rule(
    code="PC101",
    name="clock-in-prefix",
    severity="error",
    summary="A date or time in the system prompt or tools changes the cached prefix",
    fix_availability="none",
)
CAUSES = ("clock",)
"""Reported where a request's cached prefix ends at a changed clock (`pcache.divergence`)."""
FIX = "move the clock value to the newest user turn or to `metadata`"


def check(ctx: LintContext) -> Iterator[Violation]:
    """One request: a time of day in the part every request repeats is a cache breaker before
    the second request exists (a warning, once per place). A date alone is reported only when
    it changes (the divergence)."""
    request = ctx.current.request
    for slot, path, text in ctx.current.prefix_slots:
        clock = search_clock(text)
        if clock is not None and ctx.app.once(("PC101", slot)):
            yield Violation(
                f"clock value {short(clock[1])} in the cached prefix: each new value"
                " re-prefills everything after it",
                request.source_path(path),
                offset=clock[0],
                severity="warning",
                fix_title=FIX,
            )
