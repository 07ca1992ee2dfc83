r"""## What it does
OpenAI only: OpenAI-shaped bodies with an OpenAI model name, or any OpenAI-shaped body under
`--profile openai`. Reports, once per set, that requests of two or more sessions carry no
`prompt_cache_key`. Opt-in (`--extend-select PC507`): an opinion, not an observed break.

## Why is this bad?
OpenAI routes a request by a hash of its first ~256 tokens, combined with `prompt_cache_key`.
Without a key, sessions that share a long system prompt but differ later land on machines that
do not hold their conversation, and on GPT-5.6 and later only best-effort matching is done
(the cookbook reports one customer going from 60% to 87% hits by adding a key).

## Example
```json
[
  {"model": "gpt-5.2", "messages": [{"role": "system", "content": "Support bot."},
                                    {"role": "user", "content": "Refund order 1"}]},
  {"model": "gpt-5.2", "messages": [{"role": "system", "content": "Support bot."},
                                    {"role": "user", "content": "Track order 2"}]}
]
```

Use instead:
```json
[
  {"model": "gpt-5.2", "prompt_cache_key": "support-v3",
   "messages": [{"role": "system", "content": "Support bot."},
                {"role": "user", "content": "Refund order 1"}]},
  {"model": "gpt-5.2", "prompt_cache_key": "support-v3",
   "messages": [{"role": "system", "content": "Support bot."},
                {"role": "user", "content": "Track order 2"}]}
]
```
Send a `prompt_cache_key` per prompt family (or per conversation, at most ~15 requests/min each).
"""

from __future__ import annotations

from collections.abc import Iterator

from pcache.rules.base import Rule, Violation
from pcache.rules.context import LintContext
from pcache.rules.slots import openai_applies

RULE = Rule(
    code="PC507",
    name="openai-missing-cache-key",
    severity="warning",
    summary="OpenAI requests carry no prompt_cache_key",
    default=False,
)


def check(ctx: LintContext) -> Iterator[Violation]:
    request = ctx.current.request
    if not ctx.is_session_head or "prompt_cache_key" in request.raw:
        return
    if not openai_applies(request, ctx.settings.profile.name):
        return
    others = [
        head
        for head in ctx.app.other_heads(ctx.current.session)
        if "prompt_cache_key" not in head.context.request.raw
    ]
    if not others or not ctx.app.once("PC507"):
        return
    yield Violation(
        "requests of several sessions carry no prompt_cache_key: routing falls back to the"
        " first ~256 tokens and matching is best effort (reported once for the set)",
        request.source_path("messages[0]"),
        token_position=0,
        claims="none",
        fix_title="send a prompt_cache_key per prompt family or conversation",
    )
