r"""## What it does
Compares the assistant turns in the history of consecutive requests of a session. An assistant
message that carried reasoning (`reasoning_content`, `reasoning`, Anthropic `thinking` blocks)
in the previous request and comes back without it is reported.

## Why is this bad?
The previous request's cache holds the reasoning as generated. Replaying the turn without it
changes the tokens at that turn, and everything after it is prefilled again (on llama.cpp and
vLLM with reasoning-preserving templates, on Anthropic when thinking blocks are stripped).

## Example
```json
[
  {"session_id": "s1", "messages": [
    {"role": "user", "content": "Is 91 prime?"},
    {"role": "assistant", "content": "No.", "reasoning_content": "91 = 7 * 13."},
    {"role": "user", "content": "And 97?"}]},
  {"session_id": "s1", "messages": [
    {"role": "user", "content": "Is 91 prime?"},
    {"role": "assistant", "content": "No."},
    {"role": "user", "content": "And 97?"},
    {"role": "assistant", "content": "Yes.", "reasoning_content": "No divisor up to 9."},
    {"role": "user", "content": "Thanks"}]}
]
```

Use instead:
```json
[
  {"session_id": "s1", "messages": [
    {"role": "user", "content": "Is 91 prime?"},
    {"role": "assistant", "content": "No.", "reasoning_content": "91 = 7 * 13."},
    {"role": "user", "content": "And 97?"}]},
  {"session_id": "s1", "messages": [
    {"role": "user", "content": "Is 91 prime?"},
    {"role": "assistant", "content": "No.", "reasoning_content": "91 = 7 * 13."},
    {"role": "user", "content": "And 97?"},
    {"role": "assistant", "content": "Yes.", "reasoning_content": "No divisor up to 9."},
    {"role": "user", "content": "Thanks"}]}
]
```
Replay reasoning as it was produced (or use `previous_response_id` / encrypted reasoning items).
"""

from __future__ import annotations

from collections.abc import Iterator

from pcache.prompt.shapes.reasoning import REASONING_KEYS
from pcache.rules.base import Rule, Violation
from pcache.rules.context import LintContext

RULE = Rule(
    code="PC404",
    name="reasoning-dropped",
    severity="error",
    summary="Reasoning of an assistant turn was dropped when the history was replayed",
)
CAUSES = ("reasoning_dropped",)
"""Reported where a request's cached prefix ends at this cause (`pcache.divergence`); the
check below reports what a provider sees that the rendered tokens may not show."""


def _reasoning(message: dict) -> str:
    for key in REASONING_KEYS:
        value = message.get(key)
        if value:
            return str(value)
    return ""


def check(ctx: LintContext) -> Iterator[Violation]:
    if ctx.previous is None:
        return
    previous, request = ctx.previous.request, ctx.current.request
    for index in range(min(len(previous.messages), len(request.messages))):
        old, new = previous.messages[index], request.messages[index]
        if old["role"] != "assistant" or new["role"] != "assistant":
            continue
        if _reasoning(old) and not _reasoning(new):
            yield Violation(
                f"assistant message {index} lost its reasoning ({len(_reasoning(old))} characters)"
                " since the previous request",
                request.source_path(f"messages[{index}]"),
                fix_title="replay reasoning as produced",
            )
            return
