r"""## What it does
OpenAI only (as PC507). Compares, between consecutive requests of a session, the parameters
OpenAI's cache depends on: `model`, reasoning effort (`reasoning_effort`, `reasoning.effort`) and
the structured-output schema (`response_format`, `text.format`).

## Why is this bad?
Caches are per model; reasoning effort and the response schema are rendered ahead of the
system prompt. Changing any of them mid-session re-prefills the whole prompt.

## Example
```json
[
  {"session_id": "s1", "model": "gpt-5.2", "reasoning_effort": "low",
   "messages": [{"role": "user", "content": "Summarize the report"}]},
  {"session_id": "s1", "model": "gpt-5.2", "reasoning_effort": "high",
   "messages": [{"role": "user", "content": "Summarize the report"},
                {"role": "assistant", "content": "It says sales grew."},
                {"role": "user", "content": "Why?"}]}
]
```

Use instead:
```json
[
  {"session_id": "s1", "model": "gpt-5.2", "reasoning_effort": "low",
   "messages": [{"role": "user", "content": "Summarize the report"}]},
  {"session_id": "s1", "model": "gpt-5.2", "reasoning_effort": "low",
   "messages": [{"role": "user", "content": "Summarize the report"},
                {"role": "assistant", "content": "It says sales grew."},
                {"role": "user", "content": "Why?"}]}
]
```
Keep model, effort and schema fixed within a session; change them between sessions.
"""

from __future__ import annotations

from collections.abc import Iterator

from pcache.prompt.shapes.request import Request
from pcache.rules.base import Rule, Violation
from pcache.rules.context import LintContext
from pcache.rules.slots import exact, openai_applies, raw_path, resolve

RULE = Rule(
    code="PC509",
    name="openai-param-change",
    severity="warning",
    summary="Model, reasoning effort or response schema changed within a session",
)
CAUSES = ("parameter",)
"""Reported where a request's cached prefix ends at this cause (`pcache.divergence`)."""

PARAMETERS = (
    "model",
    "reasoning_effort",
    "reasoning.effort",
    "response_format",
    "text.format",
)


def _values(request: Request) -> dict[str, bytes]:
    values = {path: resolve(request.raw, path) for path in PARAMETERS}
    return {path: NULL if value is None else exact(value) for path, value in values.items()}


NULL = exact(None)


def check(ctx: LintContext) -> Iterator[Violation]:
    if ctx.previous is None:
        return
    request, previous = ctx.current.request, ctx.previous.request
    if not openai_applies(request, ctx.settings.profile.name) or previous.kind != request.kind:
        return
    old, new = _values(previous), _values(request)
    changed = [path for path in PARAMETERS if old[path] != new[path]]
    if not changed:
        return
    yield Violation(
        f"{', '.join(changed)} changed since the previous request: OpenAI's cached prefix"
        " depends on it, so the whole prompt is prefilled again",
        raw_path(request, changed[0]),
        token_position=0,
        fix_title="keep model, reasoning effort and response schema fixed within a session",
    )
