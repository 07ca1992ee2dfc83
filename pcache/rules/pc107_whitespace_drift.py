r"""## What it does
Compares the system prompt, tool descriptions and history messages of consecutive requests in a
session. Reports a place whose text differs only in whitespace or Unicode form: CRLF versus LF,
trailing spaces, a trailing newline, NFC versus NFD.

## Why is this bad?
The difference is invisible, but a tokenizer sees it: the tokens change from that character on
and the cache stops there. Normalize text once, when it is first stored.

## Example
```json
[
  {"session_id": "s1", "messages": [
    {"role": "system", "content": "You are a careful assistant.\nAnswer in English."},
    {"role": "user", "content": "Hi"}]},
  {"session_id": "s1", "messages": [
    {"role": "system", "content": "You are a careful assistant.\r\nAnswer in English.\n"},
    {"role": "user", "content": "Hi"},
    {"role": "assistant", "content": "Hello"},
    {"role": "user", "content": "Bye"}]}
]
```

Use instead:
```json
[
  {"session_id": "s1", "messages": [
    {"role": "system", "content": "You are a careful assistant.\nAnswer in English."},
    {"role": "user", "content": "Hi"}]},
  {"session_id": "s1", "messages": [
    {"role": "system", "content": "You are a careful assistant.\nAnswer in English."},
    {"role": "user", "content": "Hi"},
    {"role": "assistant", "content": "Hello"},
    {"role": "user", "content": "Bye"}]}
]
```
"""

from __future__ import annotations

from collections.abc import Iterator

from pcache.rules.base import Rule, Violation
from pcache.rules.context import LintContext
from pcache.rules.patterns import first_difference, normalize_whitespace

RULE = Rule(
    code="PC107",
    name="whitespace-drift",
    severity="error",
    summary="Text differs from the previous request only in whitespace or Unicode form",
)
FIX = "normalize line endings, trailing spaces and Unicode form once, when text is stored"


def _drift(old: str, new: str) -> int | None:
    if old == new or normalize_whitespace(old) != normalize_whitespace(new):
        return None
    return first_difference(old, new)


def check(ctx: LintContext) -> Iterator[Violation]:
    if ctx.previous is None:
        return
    request, previous = ctx.current.request, ctx.previous.request
    before = ctx.previous.slot_map()
    for slot, path, text in ctx.current.prefix_slots:
        if slot in before and slot[0] != "tool-name":
            offset = _drift(before[slot][1], text)
            if offset is not None:
                yield Violation(
                    "differs from the previous request only in whitespace/Unicode form",
                    request.source_path(path),
                    offset=offset,
                    fix_title=FIX,
                )
    start = ctx.current.first_turn_index
    for index in range(start, min(len(previous.messages), len(request.messages))):
        old = previous.messages[index].get("content")
        new = request.messages[index].get("content")
        if isinstance(old, str) and isinstance(new, str):
            offset = _drift(old, new)
            if offset is not None:
                yield Violation(
                    f"history message {index} differs from the previous request only in"
                    " whitespace/Unicode form",
                    request.source_path(f"messages[{index}].content"),
                    offset=offset,
                    fix_title=FIX,
                )
