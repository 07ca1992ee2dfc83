r"""## What it does
Compares the tool results in the history of consecutive requests of a session. Reports a result
whose text differs from the previous request but parses to the same JSON value: the application
parsed the tool's output and dumped it again (other key order, other spacing).

## Why is this bad?
The cached prefix holds the result exactly as it was first sent. Re-serialized results are new
tokens in the middle of the history, so everything after them is prefilled again.

## Example
```json
[
  {"session_id": "s1", "messages": [
    {"role": "user", "content": "Weather in Oslo?"},
    {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function",
      "function": {"name": "get_weather", "arguments": "{\"city\":\"Oslo\"}"}}]},
    {"role": "tool", "tool_call_id": "call_1", "content": "{\"temp\": 4, \"sky\": \"clear\"}"}]},
  {"session_id": "s1", "messages": [
    {"role": "user", "content": "Weather in Oslo?"},
    {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function",
      "function": {"name": "get_weather", "arguments": "{\"city\":\"Oslo\"}"}}]},
    {"role": "tool", "tool_call_id": "call_1", "content": "{\"sky\":\"clear\",\"temp\":4}"},
    {"role": "assistant", "content": "4 C and clear."},
    {"role": "user", "content": "Thanks"}]}
]
```

Use instead:
```json
[
  {"session_id": "s1", "messages": [
    {"role": "user", "content": "Weather in Oslo?"},
    {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function",
      "function": {"name": "get_weather", "arguments": "{\"city\":\"Oslo\"}"}}]},
    {"role": "tool", "tool_call_id": "call_1", "content": "{\"temp\": 4, \"sky\": \"clear\"}"}]},
  {"session_id": "s1", "messages": [
    {"role": "user", "content": "Weather in Oslo?"},
    {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function",
      "function": {"name": "get_weather", "arguments": "{\"city\":\"Oslo\"}"}}]},
    {"role": "tool", "tool_call_id": "call_1", "content": "{\"temp\": 4, \"sky\": \"clear\"}"},
    {"role": "assistant", "content": "4 C and clear."},
    {"role": "user", "content": "Thanks"}]}
]
```
Store the tool result string once and replay it unchanged.
"""

from __future__ import annotations

from collections.abc import Iterator

import orjson

from pcache.divergence.history import canonical
from pcache.rules.base import Rule, Violation
from pcache.rules.context import LintContext
from pcache.rules.patterns import first_difference

RULE = Rule(
    code="PC203",
    name="tool-result-reserialized",
    severity="error",
    summary="Tool results in history were re-serialized instead of replayed byte for byte",
)
CAUSES = ("tool_result_reserialized",)
"""Reported where a request's cached prefix ends at this cause (`pcache.divergence`); the
check below reports what a provider sees that the rendered tokens may not show."""


def parsed_equal(old: str, new: str) -> bool:
    """Both texts are JSON objects or arrays with the same value."""
    if old.strip()[:1] not in ("{", "[") or new.strip()[:1] not in ("{", "["):
        return False
    try:
        return canonical(orjson.loads(old)) == canonical(orjson.loads(new))
    except orjson.JSONDecodeError:
        return False


def check(ctx: LintContext) -> Iterator[Violation]:
    if ctx.previous is None:
        return
    old_messages, new_messages = ctx.previous.messages, ctx.current.messages
    if new_messages[: len(old_messages)] == old_messages:
        return
    for index in range(min(len(old_messages), len(new_messages))):
        old, new = old_messages[index], new_messages[index]
        if old["role"] != "tool" or new["role"] != "tool":
            continue
        before, after = old.get("content"), new.get("content")
        if not isinstance(before, str) or not isinstance(after, str) or before == after:
            continue
        if parsed_equal(before, after):
            yield Violation(
                f"tool result in message {index} was re-serialized: same JSON value, different"
                " text than in the previous request",
                ctx.current.source_path(f"messages[{index}].content"),
                offset=first_difference(before, after) or 0,
                fix_title="store the tool result text once and replay it unchanged",
            )
            return
