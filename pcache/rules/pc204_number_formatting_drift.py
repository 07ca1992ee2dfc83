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

from collections.abc import Iterator

from pcache.divergence.history import canonical_text, normalize_numbers
from pcache.rules.base import Rule, Violation
from pcache.rules.context import LintContext
from pcache.rules.patterns import first_difference
from pcache.rules.pc203_tool_result_reserialized import parsed_equal
from pcache.rules.slots import exact
from pcache.text.redaction import quote

RULE = Rule(
    code="PC204",
    name="number-formatting-drift",
    severity="warning",
    summary="Numbers are formatted differently between requests",
)
CAUSES = ("number_format",)
"""Reported where a request's cached prefix ends at this cause (`pcache.divergence`); the
check below reports what a provider sees that the rendered tokens may not show."""


def _pairs(ctx: LintContext):
    """(normalized path, old text, new text) of slots present in both requests."""
    old_slots = ctx.previous.slot_map()
    for slot, path, text in ctx.current.prefix_slots:
        if slot in old_slots:
            yield path, old_slots[slot][1], text
    old_messages, new_messages = ctx.previous.messages, ctx.current.messages
    if new_messages[: len(old_messages)] == old_messages:
        return
    for index in range(min(len(old_messages), len(new_messages))):
        old, new = old_messages[index], new_messages[index]
        if old["role"] != new["role"]:
            return
        if isinstance(old.get("content"), str) and isinstance(new.get("content"), str):
            yield f"messages[{index}].content", old["content"], new["content"]
        for number, (a, b) in enumerate(
            zip(old.get("tool_calls") or [], new.get("tool_calls") or [], strict=False)
        ):
            args_a, args_b = (
                a.get("function", {}).get("arguments"),
                b.get("function", {}).get("arguments"),
            )
            yield (
                f"messages[{index}].tool_calls[{number}].function.arguments",
                exact(args_a).decode(),
                exact(args_b).decode(),
            )


def check(ctx: LintContext) -> Iterator[Violation]:
    if ctx.previous is None:
        return
    for path, old, new in _pairs(ctx):
        if old == new or parsed_equal(old, new):
            continue
        is_json = old.strip()[:1] in ("{", "[") and new.strip()[:1] in ("{", "[")
        if normalize_numbers(old) == normalize_numbers(new) or (
            is_json and canonical_text(old) == canonical_text(new)
        ):
            offset = first_difference(old, new) or 0
            yield Violation(
                "only number formatting changed since the previous request"
                f" ({quote(old[max(0, offset - 8) : offset + 12])} became"
                f" {quote(new[max(0, offset - 8) : offset + 12])})",
                ctx.current.source_path(path),
                offset=offset,
                fix_title="format numbers once and replay the text",
            )
            return
