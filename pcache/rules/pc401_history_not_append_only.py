r"""## What it does
Checks that each request of a session repeats the previous request's messages unchanged before
adding new ones. An earlier message that was edited, deleted, inserted or moved is reported with
the kind of change. Whitespace, tool-call ids, argument serialization and dropped reasoning have
their own rules (PC107, PC304, PC202, PC404); a dropped head is PC402; a
summary or a clipped output PC403; moved system messages PC406; re-serialized tool results
PC203/PC204.

## Why is this bad?
The cache holds the previous conversation as a token prefix. Changing message k re-prefills
message k and everything after it on every request that does it.

## Example
```json
[
  {"session_id": "s1", "messages": [
    {"role": "system", "content": "You are a coding agent."},
    {"role": "user", "content": "Add a test"},
    {"role": "assistant", "content": "I will add tests/test_parser.py with three cases."},
    {"role": "user", "content": "Go"}]},
  {"session_id": "s1", "messages": [
    {"role": "system", "content": "You are a coding agent."},
    {"role": "user", "content": "Add a test"},
    {"role": "assistant", "content": "[summary: planned a test]"},
    {"role": "user", "content": "Go"},
    {"role": "assistant", "content": "Done."},
    {"role": "user", "content": "Run it"}]}
]
```

Use instead:
```json
[
  {"session_id": "s1", "messages": [
    {"role": "system", "content": "You are a coding agent."},
    {"role": "user", "content": "Add a test"},
    {"role": "assistant", "content": "I will add tests/test_parser.py with three cases."},
    {"role": "user", "content": "Go"}]},
  {"session_id": "s1", "messages": [
    {"role": "system", "content": "You are a coding agent."},
    {"role": "user", "content": "Add a test"},
    {"role": "assistant", "content": "I will add tests/test_parser.py with three cases."},
    {"role": "user", "content": "Go"},
    {"role": "assistant", "content": "Done."},
    {"role": "user", "content": "Run it"}]}
]
```
Append only; put runtime changes in new messages; compact rarely and in large steps.
"""

from __future__ import annotations

from collections.abc import Iterator

from pcache.rules.base import Rule, Violation
from pcache.rules.context import LintContext
from pcache.rules.history import compare_history
from pcache.rules.patterns import changed_context, is_volatile
from pcache.rules.pc106_fewshot_reordered import fewshot_change, paragraphs
from pcache.rules.slots import PREFIX_ROLES

RULE = Rule(
    code="PC401",
    name="history-not-append-only",
    severity="error",
    summary="Earlier messages were edited, deleted, inserted or reordered",
)


def check(ctx: LintContext) -> Iterator[Violation]:
    if ctx.previous is None:
        return
    previous, request = ctx.previous.request, ctx.current.request
    change = compare_history(ctx)
    if change.kind not in ("edit", "deletion", "insertion", "reorder"):
        return  # append-only, or a change PC402/PC403/PC406 explain
    index = change.index
    if index >= ctx.previous.last_user_index:
        return  # the previous request's newest turn was replaced: a retry, not history
    old = previous.messages[index]
    if change.kind == "edit" and index < len(request.messages):
        new = request.messages[index]
        if old["role"] in PREFIX_ROLES and new["role"] == old["role"]:
            a, b = str(old.get("content")), str(new.get("content"))
            _, was, now = changed_context(a, b) if a != b else (0, "", "")
            if is_volatile(was) and is_volatile(now):
                return  # a clock or an id: PC101/PC103 report it
            if fewshot_change(paragraphs(a), paragraphs(b)) is not None:
                return  # examples reordered or resampled: PC106 reports it
    target = min(index, len(request.messages) - 1)
    yield Violation(
        f"history is not append-only: message {index} ({old['role']}) was"
        f" {'edited' if change.kind == 'edit' else change.kind + ' affected'} since the previous"
        " request",
        request.source_path(f"messages[{target}]"),
        fix_title="append only; put changes in new messages",
    )
