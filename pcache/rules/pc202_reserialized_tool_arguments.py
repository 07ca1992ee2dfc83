r"""## What it does
Compares the tool calls in the history of consecutive requests. Reports a call whose arguments
differ byte for byte from the previous request but parse to the same value: the application
parsed the model's arguments and dumped them again (other key order, other spacing).

## Why is this bad?
The cached prefix holds the arguments exactly as the model generated them. Re-serialized
arguments are new tokens in the middle of the history, so the rest of the conversation is
prefilled again. Do not "fix" this by sorting keys: the model's own order is the one cached.
With a local engine profile (vllm, sglang) a change is reported only when the chat template
renders the difference (some templates re-serialize arguments themselves); hosted APIs are
assumed to render the bytes as sent.

## Example
```json
[
  {"session_id": "s1", "messages": [
    {"role": "user", "content": "Weather in Oslo?"},
    {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function",
      "function": {"name": "get_weather", "arguments": "{\"unit\":\"c\",\"city\":\"Oslo\"}"}}]},
    {"role": "tool", "tool_call_id": "call_1", "content": "4 C"}]},
  {"session_id": "s1", "messages": [
    {"role": "user", "content": "Weather in Oslo?"},
    {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function",
      "function": {"name": "get_weather", "arguments": "{\"city\": \"Oslo\", \"unit\": \"c\"}"}}]},
    {"role": "tool", "tool_call_id": "call_1", "content": "4 C"},
    {"role": "assistant", "content": "4 C in Oslo."},
    {"role": "user", "content": "Thanks"}]}
]
```

Use instead:
```json
[
  {"session_id": "s1", "messages": [
    {"role": "user", "content": "Weather in Oslo?"},
    {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function",
      "function": {"name": "get_weather", "arguments": "{\"unit\":\"c\",\"city\":\"Oslo\"}"}}]},
    {"role": "tool", "tool_call_id": "call_1", "content": "4 C"}]},
  {"session_id": "s1", "messages": [
    {"role": "user", "content": "Weather in Oslo?"},
    {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function",
      "function": {"name": "get_weather", "arguments": "{\"unit\":\"c\",\"city\":\"Oslo\"}"}}]},
    {"role": "tool", "tool_call_id": "call_1", "content": "4 C"},
    {"role": "assistant", "content": "4 C in Oslo."},
    {"role": "user", "content": "Thanks"}]}
]
```
Store the exact argument string the model produced and replay it unchanged.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import orjson

from pcache.divergence.history import canonical
from pcache.prompt.shapes.request import parse_arguments
from pcache.rules.base import Rule, Violation
from pcache.rules.context import LintContext
from pcache.rules.slots import exact, raw_message, raw_messages
from pcache.text.redaction import quote

RULE = Rule(
    code="PC202",
    name="reserialized-tool-arguments",
    severity="error",
    summary="Tool-call arguments in history were re-serialized instead of replayed byte for byte",
)
CAUSES = ("arguments_reserialized",)
"""Reported where a request's cached prefix ends at this cause (`pcache.divergence`); the
check below reports what a provider sees that the rendered tokens may not show."""


def _raw_calls(request, index: int) -> list[tuple[str, Any, str]]:
    """(name, raw arguments, path suffix) of the tool calls of message `index`, as sent."""
    message = raw_message(request, index)
    calls: list[tuple[str, Any, str]] = []
    if not isinstance(message, dict):
        return calls
    for number, call in enumerate(message.get("tool_calls") or []):
        function = call.get("function") if isinstance(call, dict) else None
        if isinstance(function, dict):
            calls.append((function.get("name"), function.get("arguments"), f"tool_calls[{number}]"))
    content = message.get("content")
    if isinstance(content, list):  # Anthropic tool_use blocks
        for number, block in enumerate(content):
            if isinstance(block, dict) and block.get("type") == "tool_use":
                calls.append((block.get("name"), block.get("input"), f"content[{number}]"))
    return calls


def _bytes(arguments: Any) -> bytes:
    return arguments.encode() if isinstance(arguments, str) else exact(arguments)


def _same_bytes(old: list | None, new: list | None, count: int) -> bool:
    """Whether the first `count` messages of two bodies' lists serialize to the same bytes
    (so each one does); False when either list is not the requests' own."""
    if old is None or new is None:
        return False
    try:
        return exact(old[:count]) == exact(new[:count])
    except orjson.JSONEncodeError:
        return False


def check(ctx: LintContext) -> Iterator[Violation]:
    if ctx.previous is None:
        return
    request, previous = ctx.current.request, ctx.previous.request
    shared = min(len(previous.messages), len(request.messages))
    if _same_bytes(raw_messages(previous), raw_messages(request), shared):
        return  # every message as sent before, byte for byte
    for index in range(shared):
        if request.messages[index]["role"] != "assistant":
            continue
        if exact(raw_message(previous, index)) == exact(raw_message(request, index)):
            continue
        old_calls = _raw_calls(previous, index)
        new_calls = _raw_calls(request, index)
        for (old_name, old_args, old_suffix), (new_name, new_args, suffix) in zip(
            old_calls, new_calls, strict=False
        ):
            if old_name != new_name or _bytes(old_args) == _bytes(new_args):
                continue
            old_value, new_value = parse_arguments(old_args), parse_arguments(new_args)
            if canonical(old_value) != canonical(new_value):
                continue  # different arguments: history was edited (PC401)
            base = request.source_path(f"messages[{index}]")
            if ctx.settings.profile.granularity in ("block", "token"):
                path = f"{base}.{suffix}"  # a local engine: does its template render the bytes?
                old_path = f"{previous.source_path(f'messages[{index}]')}.{old_suffix}"
                if ctx.current.text_of_path(path) == ctx.previous.text_of_path(old_path):
                    continue
            yield Violation(
                f"arguments of tool call {quote(new_name)} were re-serialized: same value,"
                " different bytes than in the previous request",
                f"{base}.{suffix}",
                fix_title="replay the exact argument string the model produced (do not re-dump)",
            )
