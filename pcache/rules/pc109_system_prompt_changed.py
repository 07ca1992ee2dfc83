r"""## What it does
Reports a request of a conversation whose cached prefix ends inside the system or developer
prompt, where the text changed since an earlier request of the same conversation and the change
is neither a clock (PC101), an id (PC103), whitespace (PC107) nor reordered examples (PC106):
a counter, a status line, retrieved snippets or a rotating instruction.

## Why is this bad?
The system prompt comes right after the tools. Changing it between turns re-prefills the whole
conversation behind it, every turn.

## Example
```json
[
  {"session_id": "s1", "messages": [
    {"role": "system",
     "content": "You are a mail assistant. The user has 3 unread messages. Be brief and polite."},
    {"role": "user", "content": "Anything new?"}]},
  {"session_id": "s1", "messages": [
    {"role": "system",
     "content": "You are a mail assistant. The user has 4 unread messages. Be brief and polite."},
    {"role": "user", "content": "Anything new?"},
    {"role": "assistant", "content": "One mail from Ana."},
    {"role": "user", "content": "Read it"}]}
]
```

Use instead:
```json
[
  {"session_id": "s1", "messages": [
    {"role": "system", "content": "You are a mail assistant. Be brief and polite."},
    {"role": "user", "content": "(3 unread) Anything new?"}]},
  {"session_id": "s1", "messages": [
    {"role": "system", "content": "You are a mail assistant. Be brief and polite."},
    {"role": "user", "content": "(3 unread) Anything new?"},
    {"role": "assistant", "content": "One mail from Ana."},
    {"role": "user", "content": "(4 unread) Read it"}]}
]
```
Keep the system prompt static; put what changes into the newest user turn.
"""

from __future__ import annotations

from pcache.rules.base import Rule

RULE = Rule(
    code="PC109",
    name="system-prompt-changed",
    severity="error",
    summary="The system prompt changes within a conversation",
)
CAUSES = ("system_prompt",)
"""Reported where a request's cached prefix ends at a changed system prompt."""
