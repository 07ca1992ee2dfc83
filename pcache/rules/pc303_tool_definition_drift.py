r"""## What it does
Compares each tool's definition (description and parameter schema, key order aside) with the
same tool, by name, in the previous request of the session. A definition whose content changed
is reported: a templated description, a count or a date inside it, a regenerated enum.

## Why is this bad?
Tool definitions sit at the start of the prompt. A changed description changes every token
after it, so the system prompt and the whole history are prefilled again.

## Example
```json
[
  {"session_id": "s1", "tools": [{"type": "function", "function": {"name": "search_docs",
    "description": "Search 1204 documents", "parameters": {"type": "object"}}}],
   "messages": [{"role": "user", "content": "Find the SLA"}]},
  {"session_id": "s1", "tools": [{"type": "function", "function": {"name": "search_docs",
    "description": "Search 1209 documents", "parameters": {"type": "object"}}}],
   "messages": [{"role": "user", "content": "Find the SLA"},
    {"role": "assistant", "content": "Searching."}, {"role": "user", "content": "Thanks"}]}
]
```

Use instead:
```json
[
  {"session_id": "s1", "tools": [{"type": "function", "function": {"name": "search_docs",
    "description": "Search the document store", "parameters": {"type": "object"}}}],
   "messages": [{"role": "user", "content": "Find the SLA"}]},
  {"session_id": "s1", "tools": [{"type": "function", "function": {"name": "search_docs",
    "description": "Search the document store", "parameters": {"type": "object"}}}],
   "messages": [{"role": "user", "content": "Find the SLA"},
    {"role": "assistant", "content": "Searching."}, {"role": "user", "content": "Thanks"}]}
]
```
Keep tool definitions static; put changing facts in tool results.
"""

from __future__ import annotations

from collections.abc import Iterator

from pcache.prompt.request import tool_name
from pcache.rules.base import Rule, Violation
from pcache.rules.context import LintContext
from pcache.rules.patterns import changed_context, changed_windows, is_volatile, short, widen
from pcache.rules.slots import canonical, tool_function

RULE = Rule(
    code="PC303",
    name="tool-definition-drift",
    severity="error",
    summary="A tool's description or parameters changed between requests",
)


def check(ctx: LintContext) -> Iterator[Violation]:
    if ctx.previous is None:
        return
    request = ctx.current.request
    before = {tool_name(t): tool_function(t) for t in ctx.previous.request.tools}
    for index, tool in enumerate(request.tools):
        name = tool_name(tool)
        old = before.get(name)
        new = tool_function(tool)
        if old is None or canonical(old) == canonical(new):
            continue
        base = f"tools[{index}].function" if "function" in tool else f"tools[{index}]"
        old_text, new_text = old.get("description"), new.get("description")
        if isinstance(old_text, str) and isinstance(new_text, str) and old_text != new_text:
            start, was, now = changed_windows(old_text, new_text)
            _, wide_was, wide_now = changed_context(old_text, new_text)
            if is_volatile(wide_was) and is_volatile(wide_now):
                continue  # reported by PC101/PC103 with the same evidence
            yield Violation(
                f"description of tool {name!r} changed"
                f" ({short(widen(old_text, start, start + len(was), 10))} ->"
                f" {short(widen(new_text, start, start + len(now), 10))})",
                request.source_path(f"{base}.description"),
                offset=start,
                fix_title="keep tool definitions static",
            )
            continue
        if canonical(old.get("parameters")) != canonical(new.get("parameters")):
            yield Violation(
                f"parameters of tool {name!r} changed since the previous request",
                request.source_path(f"{base}.parameters"),
                fix_title="keep tool definitions static",
            )
