r"""## What it does
Reported where a session's request parts from an earlier session's request inside the shared
part (system or developer prompt, tools) at a small value (a name, an email address, a path, a
profile, a memory) and what follows it in the rendered prompt (the rest of the prompt, the
tools, the conversation) would otherwise be shared. Clocks, ids, whitespace and reordered
examples have their own rules.

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
