r"""## What it does
Renders the chat template twice, at two frozen dates, and compares the tokens. A difference
means the template writes the current date into the prompt (`strftime_now`, `date_string`,
harmony's `Current date:`). When the requests' timestamps span two calendar days, the prefix
did change between them: an error at the first differing token. When requests carry no
timestamps, a warning says the date cannot be checked. One finding per template, located at
the template (the `--tokenizer` given), and only for a template the user chose with
`--tokenizer` (or `tokenizer` in the configuration): the default renderer is pcache's
assumption, not the user's model. Silence it with `--ignore PC102`.

## Why is this bad?
A server that renders its own date changes the prefix of every prompt at each day boundary, and
two servers whose clocks differ never share a prefix. Pass the date explicitly (chat-template
kwargs, harmony's conversation start date) or pin the template.

## Example
```json
[
  {"session_id": "s1", "timestamp": "2026-03-02T23:59:30Z",
   "messages": [{"role": "system", "content": "You are helpful."},
                {"role": "user", "content": "Hi"}]},
  {"session_id": "s1", "timestamp": "2026-03-03T00:00:20Z",
   "messages": [{"role": "system", "content": "You are helpful."},
                {"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello"},
                {"role": "user", "content": "Still there?"}]}
]
```
(with a template that prints today's date, such as Llama 3.2's or gpt-oss's harmony format)

Use instead:
```json
[
  {"session_id": "s1", "timestamp": "2026-03-02T23:59:30Z",
   "messages": [{"role": "system", "content": "You are helpful."},
                {"role": "user", "content": "Hi"}]},
  {"session_id": "s1", "timestamp": "2026-03-03T00:00:20Z",
   "messages": [{"role": "system", "content": "You are helpful."},
                {"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello"},
                {"role": "user", "content": "Still there?"}]}
]
```
(with `--tokenizer o200k_base`, or any template that takes the date as a fixed argument)
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import date, datetime, timedelta, timezone

from pcache.prompt.renderers.interface import RenderOptions, WrappingRenderer
from pcache.prompt.renderers.render import render
from pcache.rules.base import Rule, Violation
from pcache.rules.context import LintContext
from pcache.text.prefix import common_prefix_length

RULE = Rule(
    code="PC102",
    name="template-clock",
    severity="error",
    summary="The chat template writes today's date, so the prefix changes every day",
)
FIX = "pass the date explicitly (template kwargs) or pin a template without it"


def _clock_position(ctx: LintContext) -> int | None:
    """First token that differs between renders at two dates, or None (a date-free template)."""
    current = ctx.current
    first = current.settings.date
    second = (date.fromisoformat(first) + timedelta(days=197)).isoformat()
    renderer = current.settings.renderer
    tokens_a = render(current.request, renderer, RenderOptions(date=first)).token_ids
    tokens_b = render(current.request, renderer, RenderOptions(date=second)).token_ids
    return None if tokens_a == tokens_b else common_prefix_length(tokens_a, tokens_b)


def _day(timestamp_ms: float | None) -> str | None:
    if timestamp_ms is None:
        return None
    return datetime.fromtimestamp(timestamp_ms / 1000, tz=timezone.utc).date().isoformat()


def check(ctx: LintContext) -> Iterator[Violation]:
    current = ctx.current
    if not current.is_chat:
        return
    name = current.settings.renderer.name
    dated = ctx.app.cache.get(("PC102", name))
    if dated is None:
        from pcache.prompt.renderers.hf_template import template_calls_clock

        renderer = current.settings.renderer
        if isinstance(renderer, WrappingRenderer):
            renderer = renderer.inner
        dated = ctx.app.cache[("PC102", name)] = template_calls_clock(renderer, current.request)
    if not dated:
        return
    silence = f"; pin the date or silence this with --ignore {RULE.code}"
    day = _day(current.request.timestamp)
    if day is None:
        if ctx.app.once(("PC102", name, "untimed")):
            position = _clock_position(ctx)
            yield Violation(
                f"the chat template ({name}) writes today's date at token {position}; these"
                " requests carry no timestamps, so whether the day changed between them cannot"
                " be seen" + silence,
                "",
                token_position=position,
                severity="warning",
                claims="none",
                group=("PC102", name),
                at_template=True,
                fix_title=FIX,
            )
        return
    first_day = ctx.app.cache.setdefault(("PC102", name, "day"), day)
    if day == first_day or not ctx.app.once(("PC102", name, "days")):
        return
    position = _clock_position(ctx)
    yield Violation(
        f"the chat template ({name}) writes today's date and these requests span {first_day}"
        f" and {day}: every prefix changed at token {position} when the day changed (lint"
        f" renders every request at --date {current.settings.date}, so the tokens this loses"
        " are not in its figures)" + silence,
        "",
        token_position=position,
        claims="none",
        group=("PC102", name),
        at_template=True,
        fix_title=FIX,
    )
