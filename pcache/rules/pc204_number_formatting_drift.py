r"""## What it does
Compares the same slots of consecutive requests of a session (system prompt, tool descriptions,
earlier messages, tool-call arguments, tool results). Reports text that differs only in how its
numbers are written: `1.0` and `1`, `1e3` and `1000.0`, `0.50` and `0.5`.

## Why is this bad?
A number formatted another way is another token sequence. Typical causes: a value that went
through a float and back, or two serializers with other number formats. From that point on the
prompt is prefilled again.

## Example
```json
[
  {"session_id": "s1", "messages": [
    {"role": "system", "content": "Prices are in EUR. Shipping costs 5.0 per order."},
    {"role": "user", "content": "What does shipping cost?"}]},
  {"session_id": "s1", "messages": [
    {"role": "system", "content": "Prices are in EUR. Shipping costs 5 per order."},
    {"role": "user", "content": "What does shipping cost?"},
    {"role": "assistant", "content": "5 EUR."}, {"role": "user", "content": "And returns?"}]}
]
```

Use instead:
```json
[
  {"session_id": "s1", "messages": [
    {"role": "system", "content": "Prices are in EUR. Shipping costs 5.00 per order."},
    {"role": "user", "content": "What does shipping cost?"}]},
  {"session_id": "s1", "messages": [
    {"role": "system", "content": "Prices are in EUR. Shipping costs 5.00 per order."},
    {"role": "user", "content": "What does shipping cost?"},
    {"role": "assistant", "content": "5 EUR."}, {"role": "user", "content": "And returns?"}]}
]
```
Format numbers once (a fixed format string) and replay the text.
"""

from __future__ import annotations

from pcache.rules.base import Rule

RULE = Rule(
    code="PC204",
    name="number-formatting-drift",
    severity="warning",
    summary="Numbers are formatted differently between requests",
)
CAUSES = ("number_format",)
"""Reported where a request's cached prefix ends at this cause (`pcache.divergence`)."""
