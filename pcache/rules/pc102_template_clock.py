r"""## What it does
Renders the chat template twice, at two frozen dates, and compares the tokens. Any difference
means the template writes the current date into the prompt (`strftime_now`, `date_string`,
harmony's `Current date:`). Reported once per set, at the first differing token.

## Why is this bad?
A server that renders its own date changes the prefix of every prompt at each day boundary, and
two servers whose clocks differ never share a prefix. Pass the date explicitly (chat-template
kwargs) or pin the template.

## Example
```json
{"messages": [{"role": "system", "content": "You are helpful."},
              {"role": "user", "content": "Hi"}]}
```
(with a template that prints today's date, such as Llama 3.2's or gpt-oss's harmony format)

Use instead:
```json
{"messages": [{"role": "system", "content": "You are helpful."},
              {"role": "user", "content": "Hi"}]}
```
(rendered by a template that takes the date as a fixed argument, or prints none)
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import date, timedelta

from pcache.prompt.render import render
from pcache.prompt.tokenizer import RenderOptions
from pcache.rules.base import Rule, Violation
from pcache.rules.context import LintContext, common_prefix

RULE = Rule(
    code="PC102",
    name="template-clock",
    severity="error",
    summary="The chat template writes today's date, so the prefix changes every day",
)


def check(ctx: LintContext) -> Iterator[Violation]:
    current = ctx.current
    if not current.is_chat or not ctx.app.once(("PC102", current.settings.renderer.name)):
        return
    first = current.settings.date
    second = (date.fromisoformat(first) + timedelta(days=197)).isoformat()
    renderer = current.settings.renderer
    tokens_a = render(current.request, renderer, RenderOptions(date=first)).token_ids
    tokens_b = render(current.request, renderer, RenderOptions(date=second)).token_ids
    if tokens_a == tokens_b:
        return
    position = common_prefix(tokens_a, tokens_b)
    char = current.rendered.token_char(position)
    where = current.rendered.path_at(char)
    text = current.rendered.text[char : char + 24].replace("\n", "\\n")
    yield Violation(
        f"the chat template ({renderer.name}) writes the date: rendering at {first} and {second}"
        f" differs from token {position} ({text!r}); the prefix changes every day",
        where or "",
        token_position=position,
        fix_title="pass the date explicitly (template kwargs) or pin a template without it",
    )
