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

from pcache.rules.base import Rule

RULE = Rule(
    code="PC203",
    name="tool-result-reserialized",
    severity="error",
    summary="Tool results in history were re-serialized instead of replayed byte for byte",
)
CAUSES = ("tool_result_reserialized",)
"""Reported where a request's cached prefix ends at this cause (`pcache.divergence`)."""
