r"""## What it does
Finds random-looking identifiers (UUIDs, ULIDs, long hex strings, `req_`/`trace_`/`session_`
ids) in the system prompt, developer messages and tool definitions. When the same place holds a
different identifier in the next request of the session, it is reported as an error.

## Why is this bad?
An identifier that is drawn per request makes every request's prefix unique from that point on,
so nothing after it is ever reused. A stable identifier (a tenant id, a document hash) is fine;
comparing requests tells the two apart.

## Example
```json
[
  {"session_id": "s1", "messages": [
    {"role": "system", "content": "Request id: 3f1c2a9e-8d4b-4c1e-9a7f-2b6d8e0c1f43. Be brief."},
    {"role": "user", "content": "Hi"}]},
  {"session_id": "s1", "messages": [
    {"role": "system", "content": "Request id: 9b2e7c41-0a6d-4f3b-8e19-5c7a2d4f6b80. Be brief."},
    {"role": "user", "content": "Hi"},
    {"role": "assistant", "content": "Hello!"},
    {"role": "user", "content": "Bye"}]}
]
```

Use instead:
```json
[
  {"session_id": "s1", "metadata": {"request_id": "3f1c2a9e-8d4b-4c1e-9a7f-2b6d8e0c1f43"},
   "messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}]},
  {"session_id": "s1", "metadata": {"request_id": "9b2e7c41-0a6d-4f3b-8e19-5c7a2d4f6b80"},
   "messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"},
    {"role": "assistant", "content": "Hello!"}, {"role": "user", "content": "Bye"}]}
]
```
Send per-request ids in `metadata` or headers, never in the prompt.
"""

from __future__ import annotations

from collections.abc import Iterator

from pcache.rules.base import Rule, Violation
from pcache.rules.context import LintContext
from pcache.rules.patterns import RANDOM_ID, changed_windows, search_random_id, short, widen

RULE = Rule(
    code="PC103",
    name="random-id-in-prefix",
    severity="error",
    summary="A per-request identifier in the system prompt or tools makes every prefix unique",
)
FIX = "drop the identifier from the prompt or send it in `metadata`/headers"


def check(ctx: LintContext) -> Iterator[Violation]:
    request = ctx.current.request
    before = ctx.previous.slot_map() if ctx.previous else None
    for slot, path, text in ctx.current.prefix_slots:
        if before is not None:
            if slot not in before or before[slot][1] == text:
                continue
            old_text = before[slot][1]
            start, old, new = changed_windows(old_text, text)
            new_ids = RANDOM_ID.findall(widen(text, start, start + len(new), 40))
            old_ids = RANDOM_ID.findall(widen(old_text, start, start + len(old), 40))
            if new_ids and old_ids and set(new_ids) != set(old_ids):
                yield Violation(
                    f"identifier in the cached prefix changes between requests"
                    f" ({short(old_ids[0])} -> {short(new_ids[0])})",
                    request.source_path(path),
                    offset=start,
                    fix_title=FIX,
                )
            continue
        match = search_random_id(text)
        if match:
            yield Violation(
                f"random-looking identifier {short(match[1])} in the cached prefix",
                request.source_path(path),
                offset=match[0],
                severity="warning",
                fix_title=FIX,
                hint=True,
            )
