r"""## What it does
Compares the tool calls in the history of consecutive requests of a session. A call with the
same name and arguments at the same place whose `id` changed is reported (the application
draws new ids each time it rebuilds the history, e.g. when translating between APIs).

## Why is this bad?
Tool-call ids are rendered into the prompt (and the matching `tool_call_id` of each result).
New ids are new tokens in the middle of the history, so every turn after them is prefilled again.
Ids must be stable and unique: persist them, or derive them from name, arguments and position.

## Example
```json
[
  {"session_id": "s1", "messages": [
    {"role": "user", "content": "List files"},
    {"role": "assistant", "content": null, "tool_calls": [{"id": "call_a81f", "type": "function",
      "function": {"name": "ls", "arguments": "{}"}}]},
    {"role": "tool", "tool_call_id": "call_a81f", "content": "main.py"}]},
  {"session_id": "s1", "messages": [
    {"role": "user", "content": "List files"},
    {"role": "assistant", "content": null, "tool_calls": [{"id": "call_77c2", "type": "function",
      "function": {"name": "ls", "arguments": "{}"}}]},
    {"role": "tool", "tool_call_id": "call_77c2", "content": "main.py"},
    {"role": "assistant", "content": "One file."},
    {"role": "user", "content": "Open it"}]}
]
```

Use instead:
```json
[
  {"session_id": "s1", "messages": [
    {"role": "user", "content": "List files"},
    {"role": "assistant", "content": null, "tool_calls": [{"id": "call_a81f", "type": "function",
      "function": {"name": "ls", "arguments": "{}"}}]},
    {"role": "tool", "tool_call_id": "call_a81f", "content": "main.py"}]},
  {"session_id": "s1", "messages": [
    {"role": "user", "content": "List files"},
    {"role": "assistant", "content": null, "tool_calls": [{"id": "call_a81f", "type": "function",
      "function": {"name": "ls", "arguments": "{}"}}]},
    {"role": "tool", "tool_call_id": "call_a81f", "content": "main.py"},
    {"role": "assistant", "content": "One file."},
    {"role": "user", "content": "Open it"}]}
]
```
"""

from __future__ import annotations

from collections.abc import Iterator

from pcache.divergence.history import canonical, tool_function
from pcache.rules.base import Rule, Violation
from pcache.rules.context import LintContext
from pcache.text.redaction import quote

RULE = Rule(
    code="PC304",
    name="tool-call-id-regenerated",
    severity="error",
    summary="A tool call in history got a new id between requests",
)
CAUSES = ("tool_call_id",)
"""Reported where a request's cached prefix ends at this cause (`pcache.divergence`); the
check below reports what a provider sees that the rendered tokens may not show."""


def check(ctx: LintContext) -> Iterator[Violation]:
    if ctx.previous is None:
        return
    request, previous = ctx.current.request, ctx.previous.request
    for index in range(min(len(previous.messages), len(request.messages))):
        old, new = previous.messages[index], request.messages[index]
        if old["role"] != "assistant" or new["role"] != "assistant":
            continue
        for number, (a, b) in enumerate(
            zip(old.get("tool_calls") or [], new.get("tool_calls") or [], strict=False)
        ):
            fa, fb = tool_function(a), tool_function(b)
            same_call = fa.get("name") == fb.get("name") and canonical(
                fa.get("arguments")
            ) == canonical(fb.get("arguments"))
            if same_call and a.get("id") and b.get("id") and a.get("id") != b.get("id"):
                yield Violation(
                    f"tool call {quote(fb.get('name'))} has a new id ({quote(a.get('id'))} ->"
                    f" {quote(b.get('id'))}) for the same call",
                    request.source_path(f"messages[{index}].tool_calls[{number}]"),
                    fix_title="persist tool-call ids, or derive them from name+arguments+index",
                )
