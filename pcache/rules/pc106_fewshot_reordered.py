r"""## What it does
Reported where a request's cached prefix ends in the system prompt because its paragraphs
changed order, or a rotating subset of example paragraphs (`Example`, `Q:`, `Input:`, `User:`,
with or without a heading line right above them) was drawn around a stable rest.

## Why is this bad?
Examples sit early in the prompt. Shuffling or resampling them changes the prefix from the first
moved example on, so everything after it, including the whole conversation, is prefilled again.

## Example
```json
[
  {"session_id": "s1", "messages": [
    {"role": "system", "content": "Rate it.\n\nExample: great -> +\n\nExample: awful -> -"},
    {"role": "user", "content": "'fine'"}]},
  {"session_id": "s1", "messages": [
    {"role": "system", "content": "Rate it.\n\nExample: awful -> -\n\nExample: great -> +"},
    {"role": "user", "content": "'fine'"}, {"role": "assistant", "content": "neutral"},
    {"role": "user", "content": "'superb'"}]}
]
```

Use instead:
```json
[
  {"session_id": "s1", "messages": [
    {"role": "system", "content": "Rate it.\n\nExample: great -> +\n\nExample: awful -> -"},
    {"role": "user", "content": "'fine'"}]},
  {"session_id": "s1", "messages": [
    {"role": "system", "content": "Rate it.\n\nExample: great -> +\n\nExample: awful -> -"},
    {"role": "user", "content": "'fine'"}, {"role": "assistant", "content": "neutral"},
    {"role": "user", "content": "'superb'"}]}
]
```
Pin the example set and its order.
"""

from __future__ import annotations

from pcache.rules.base import Rule

RULE = Rule(
    code="PC106",
    name="fewshot-reordered",
    severity="warning",
    summary="Few-shot examples are reordered or resampled between requests",
)
CAUSES = ("fewshot_order",)
"""Reported where a request's cached prefix ends at this cause (`pcache.divergence`)."""
