r"""## What it does
Reported where a request's cached prefix ends inside a tool schema that holds the same value
serialized with another key order. One request alone: schema keys that are not sorted are a
hint (fixable with `--fix`).

## Why is this bad?
Tool schemas are rendered near the very start of the prompt. Go and Swift maps, and JSON
round-trips through some databases, serialize keys in a varying order; each new order is a new
prefix, and everything after the tools is prefilled again.

## Example
```json
[
  {"session_id": "s1", "tools": [{"type": "function", "function": {"name": "get_weather",
    "description": "Weather for a city", "parameters": {"properties": {"city": {"type": "string"}},
    "required": ["city"], "type": "object"}}}],
   "messages": [{"role": "user", "content": "Weather in Oslo?"}]},
  {"session_id": "s1", "tools": [{"type": "function", "function": {"name": "get_weather",
    "description": "Weather for a city", "parameters": {"type": "object", "required": ["city"],
    "properties": {"city": {"type": "string"}}}}}],
   "messages": [{"role": "user", "content": "Weather in Oslo?"},
    {"role": "assistant", "content": "Sunny."}, {"role": "user", "content": "And Bergen?"}]}
]
```

Use instead:
```json
[
  {"session_id": "s1", "tools": [{"type": "function", "function": {"name": "get_weather",
    "description": "Weather for a city", "parameters": {"properties": {"city": {"type": "string"}},
    "required": ["city"], "type": "object"}}}],
   "messages": [{"role": "user", "content": "Weather in Oslo?"}]},
  {"session_id": "s1", "tools": [{"type": "function", "function": {"name": "get_weather",
    "description": "Weather for a city", "parameters": {"properties": {"city": {"type": "string"}},
    "required": ["city"], "type": "object"}}}],
   "messages": [{"role": "user", "content": "Weather in Oslo?"},
    {"role": "assistant", "content": "Sunny."}, {"role": "user", "content": "And Bergen?"}]}
]
```
Serialize definitions canonically (`json.dumps(..., sort_keys=True)`, sorted maps).

## Fix safety
`--fix` sorts the keys of tool schemas in request files. It never touches messages, so a model's
own tool-call arguments keep the exact bytes it produced.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from pcache.divergence.history import tool_function
from pcache.prompt.shapes.request import tool_name
from pcache.rules.base import Rule, Violation
from pcache.rules.context import LintContext
from pcache.rules.slots import exact
from pcache.text.redaction import quote

RULE = Rule(
    code="PC201",
    name="unsorted-schema-keys",
    severity="error",
    summary="Tool schema keys are serialized in an order that is not stable",
    fix_availability="sometimes",
)
CAUSES = ("key_order",)
"""Reported where a request\'s cached prefix ends at a schema written in another key order."""


def _schema(tool: dict[str, Any]) -> Any:
    return tool_function(tool).get("parameters")


def is_sorted(value: Any) -> bool:
    if isinstance(value, dict):
        keys = list(value)
        return keys == sorted(keys) and all(is_sorted(item) for item in value.values())
    if isinstance(value, list):
        return all(is_sorted(item) for item in value)
    return True


def _sorted(ctx: LintContext, schema: Any) -> bool:
    key = ("PC201", exact(schema))
    if key not in ctx.app.cache:
        ctx.app.cache[key] = is_sorted(schema)
    return ctx.app.cache[key]


def _path(request, index: int) -> str:
    tool = request.tools[index]
    return request.source_path(
        f"tools[{index}].function.parameters" if "function" in tool else f"tools[{index}]"
    )


def check(ctx: LintContext) -> Iterator[Violation]:
    """One request: tool schemas whose keys are not sorted (a hint, fixable)."""
    request = ctx.current.request
    for index, tool in enumerate(request.tools):
        schema = _schema(tool)
        if schema is None:
            continue
        name = tool_name(tool)
        if not _sorted(ctx, schema) and ctx.app.once(("PC201", name, exact(schema))):
            yield Violation(
                f"schema keys of tool {quote(name)} are not sorted; an unstable serializer would"
                " change the prefix",
                _path(request, index),
                severity="info",
                hint=True,
                fix_title="sort schema keys",
                fixable=True,
            )
