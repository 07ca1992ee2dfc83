r"""## What it does
Uses the requests' `timestamp` fields: reports first requests of sessions that share a new
prefix (the same tools and system prompt, not seen before) and were sent within one second of
the first request with that prefix, before its response could have started. A hint (info).
Opt-in (`--extend-select PC512`): an opinion, not an observed break.

## Why is this bad?
A cache entry becomes readable only once the first response begins (Anthropic documents this;
engines compute the shared blocks only once a request is scheduled). Requests fanned out at
the same moment each write the same prefix again.

## Example
```json
[
  {"timestamp": 1767261600000, "messages": [
    {"role": "system", "content": "Grade the essay against the rubric."},
    {"role": "user", "content": "Essay 1"}]},
  {"timestamp": 1767261600100, "messages": [
    {"role": "system", "content": "Grade the essay against the rubric."},
    {"role": "user", "content": "Essay 2"}]}
]
```

Use instead:
```json
[
  {"timestamp": 1767261600000, "messages": [
    {"role": "system", "content": "Grade the essay against the rubric."},
    {"role": "user", "content": "Essay 1"}]},
  {"timestamp": 1767261605000, "messages": [
    {"role": "system", "content": "Grade the essay against the rubric."},
    {"role": "user", "content": "Essay 2"}]}
]
```
Send one request first, wait for its first token, then fan out.
"""

from __future__ import annotations

from collections.abc import Iterator

from pcache.rules.base import Rule, Violation
from pcache.rules.context import LintContext
from pcache.rules.slots import exact

RULE = Rule(
    code="PC512",
    name="cold-fanout",
    severity="info",
    summary="Several requests with the same new prefix were sent at once",
    default=False,
)

WINDOW_MS = 1000.0


def check(ctx: LintContext) -> Iterator[Violation]:
    current = ctx.current
    when = current.request.timestamp
    if not ctx.is_session_head or when is None or not current.is_chat:
        return
    slots = current.prefix_slots
    if not slots:
        return
    key = ("PC512", exact([[list(slot), text] for slot, _, text in slots]))
    first = ctx.app.cache.get(key)
    if first is None:
        ctx.app.cache[key] = when
        return
    if 0 <= when - first < WINDOW_MS:
        yield Violation(
            f"sent {when - first:.0f} ms after the first request with the same new prefix,"
            " before its response could start: the prefix is written again",
            current.request.source_path("messages[0]"),
            token_position=0,
            claims="none",
            fix_title="warm the prefix with one request, then fan out",
        )
