r"""## What it does
Splits the system prompt into paragraphs (blank-line separated) and compares them with the
previous request of the session (or, for a session's first request, the latest other session).
Reported: the same paragraphs in another order, or a rotating subset of example paragraphs
(paragraphs that start like `Example`, `Q:`, `Input:` or `User:`) around a stable rest.

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

import re
from collections.abc import Iterator

from pcache.rules.base import Rule, Violation
from pcache.rules.context import LintContext

RULE = Rule(
    code="PC106",
    name="fewshot-reordered",
    severity="warning",
    summary="Few-shot examples are reordered or resampled between requests",
)

EXAMPLE = re.compile(
    r"(?:example\b|q:|question:|input:|user:|a:|answer:|output:|<example>)", re.IGNORECASE
)
PARAGRAPH = re.compile(r"\n\s*\n")


def paragraphs(text: str) -> list[str]:
    return [part.strip() for part in PARAGRAPH.split(text) if part.strip()]


def fewshot_change(old: list[str], new: list[str]) -> tuple[int, str] | None:
    """(first differing paragraph, kind) when `new` reorders or resamples `old`'s examples."""
    first = next((i for i, (a, b) in enumerate(zip(old, new, strict=False)) if a != b), None)
    if first is None:
        return None
    if sorted(old) == sorted(new):
        moved = [p for a, p in zip(old, new, strict=True) if a != p]
        return (first, "reordered") if len(moved) >= 2 else None
    gone = [p for p in old if p not in new]
    came = [p for p in new if p not in old]
    examples = [p for p in old if EXAMPLE.match(p)]
    if not gone or not came or len(examples) < 2 or len(examples) == len(gone):
        return None
    if all(EXAMPLE.match(p) for p in gone + came):
        return first, "resampled"
    return None


def check(ctx: LintContext) -> Iterator[Violation]:
    current = ctx.current
    if ctx.previous is not None:
        where, other = "the previous request", ctx.previous
    else:
        heads = ctx.app.other_heads(current.session)[:1]
        if not heads:
            return
        where, other = f"session {heads[0].session}", heads[0].context
    for index in range(min(current.first_turn_index, other.first_turn_index)):
        new, old = current.messages[index].get("content"), other.messages[index].get("content")
        if not isinstance(new, str) or not isinstance(old, str) or new == old:
            continue
        change = fewshot_change(paragraphs(old), paragraphs(new))
        if change is None:
            continue
        first, kind = change
        paragraph = paragraphs(new)[first]
        yield Violation(
            f"few-shot examples {kind} since {where} (paragraph {first} of the system prompt"
            " changed); everything after it is prefilled again",
            current.source_path(f"messages[{index}].content"),
            offset=new.find(paragraph),
            fix_title="pin the example set and its order",
        )
        return
