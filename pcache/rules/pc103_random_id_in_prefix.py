r"""## What it does
Reported where a request's cached prefix (the longest prefix it shares with any earlier request,
whatever its session or user) ends at an identifier that changed: a UUID, a ULID, a trace id,
a nonce, a prefixed request or session id. One request alone: a random-looking id in the part
every request repeats is a hint.

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
from pcache.rules.patterns import short
from pcache.text.patterns import search_random_id

RULE = Rule(
    code="PC103",
    name="random-id-in-prefix",
    severity="error",
    summary="A per-request identifier in the system prompt or tools makes every prefix unique",
)
CAUSES = ("random_id",)
"""Reported where a request's cached prefix ends at a changed id (`pcache.divergence`)."""
FIX = "drop the identifier from the prompt or send it in `metadata`/headers"


def check(ctx: LintContext) -> Iterator[Violation]:
    """One request: a random-looking id in the part every request repeats (a hint)."""
    request = ctx.current.request
    for slot, path, text in ctx.current.prefix_slots:
        match = search_random_id(text)
        if match and ctx.app.once(("PC103", slot)):
            yield Violation(
                f"random-looking identifier {short(match[1])} in the cached prefix",
                request.source_path(path),
                offset=match[0],
                severity="warning",
                fix_title=FIX,
                hint=True,
            )
