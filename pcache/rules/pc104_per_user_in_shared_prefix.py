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

from pcache.rules.base import Rule

RULE = Rule(
    code="PC104",
    name="per-user-in-shared-prefix",
    severity="error",
    summary="Per-user data in the system prompt or tools splits the shared prefix by user",
)
CAUSES = ("per_user",)
"""Reported where a request's cached prefix ends at this cause (`pcache.divergence`)."""
