r"""## What it does
For two consecutive requests of a session whose messages are append-only, checks at token level
that the earlier prompt (rendered with its generation prompt, which its reply continued) is a
token prefix of the later one. Reports the first divergent token and the template text there.

## Why is this bad?
Some chat templates render a turn differently once it is history: Qwen3 writes an empty
`<think>` block only on the newest turn, others drop reasoning of earlier turns, and a join of
two text pieces can merge into different tokens. The application did everything right, yet the
engine cannot reuse the cached turn. Fix it with template flags (`preserve_thinking`), a patched
template, or by keeping reasoning in history.

## Example
```json
[
  {"session_id": "s1", "messages": [{"role": "user", "content": "Hi"}]},
  {"session_id": "s1", "messages": [{"role": "user", "content": "Hi"},
    {"role": "assistant", "content": "\n\nHello! How can I help you with your order today?"},
    {"role": "user", "content": "Bye"}]}
]
```
(with `--tokenizer o200k_base`: the generation prompt ends in a newline token, and the reply's
leading newlines merge with it into another token once the turn is history)

Use instead:
```json
[
  {"session_id": "s1", "messages": [{"role": "user", "content": "Hi"}]},
  {"session_id": "s1", "messages": [{"role": "user", "content": "Hi"},
    {"role": "assistant", "content": "Hello! How can I help you with your order today?"},
    {"role": "user", "content": "Bye"}]}
]
```
(with `--tokenizer o200k_base`; store replies without leading newlines, or use a template whose
generation prompt ends at a special token)
"""

from __future__ import annotations

from collections.abc import Iterator

from pcache.rules.base import Rule, Violation
from pcache.rules.context import LintContext, common_prefix
from pcache.rules.cost import expected_shared, reusable
from pcache.rules.slots import exact

RULE = Rule(
    code="PC405",
    name="template-non-append-only",
    severity="error",
    summary="The chat template renders an earlier turn differently once it is history",
)


def check(ctx: LintContext) -> Iterator[Violation]:
    if ctx.previous is None or not ctx.current.is_chat:
        return
    previous, current = ctx.previous, ctx.current
    old_messages, new_messages = previous.request.messages, current.request.messages
    if len(new_messages) <= len(old_messages):
        return
    if new_messages[: len(old_messages)] != old_messages:
        return  # the messages themselves changed: PC401 and friends
    old_raw, new_raw = previous.request.raw, current.request.raw
    if exact(old_raw.get("messages", [])) != exact(
        new_raw.get("messages", [])[: len(old_messages)]
    ):
        return  # same values, other bytes (PC202)
    if exact(old_raw.get("tools")) != exact(new_raw.get("tools")):
        return
    old_tokens, new_tokens = previous.token_ids, current.token_ids
    position = common_prefix(old_tokens, new_tokens)
    if position == len(old_tokens):
        return
    settings = ctx.settings
    size, total = settings.block_size, len(new_tokens)
    if reusable(settings.profile, position, total, size) >= reusable(
        settings.profile, expected_shared(ctx), total, size
    ):
        return  # the divergence falls where this cache reuses nothing anyway
    from pcache.diff import explain

    _, cause = explain(previous.rendered, current.rendered, position)
    where = cause.b_path
    origin = f"content of {where}" if where else "template text"
    yield Violation(
        f"turn {len(old_messages)} rendered with its generation prompt is not a token prefix of"
        f" the next request: first divergent token {position} of {len(old_tokens)}"
        f" ({origin}: {cause.a_excerpt!r} became {cause.b_excerpt!r})",
        where or "",
        token_position=position,
        fix_title="use template flags that keep history as generated, or a patched template",
    )
