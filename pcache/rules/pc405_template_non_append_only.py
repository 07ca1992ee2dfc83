r"""## What it does
For two consecutive requests of a session whose messages are append-only, checks at token level
that (1) the earlier prompt, rendered with the generation prompt its reply continued, and (2)
the reply itself, rendered as the newest turn (as it was generated), are token prefixes of the
later request. (2) is checked for replies that templates are known to render differently once
they are history: with reasoning, with tool calls, or with leading or trailing whitespace.
Reports the first divergent token and the template text or message there, when the divergence
loses tokens the chosen cache would have reused.

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

import dataclasses
from bisect import bisect_left
from collections.abc import Iterator

from pcache.cache.reuse import reusable
from pcache.divergence.classify import RENDERED_PARAMETERS, explain
from pcache.prompt.renderers.render import render
from pcache.prompt.shapes.reasoning import REASONING_KEYS
from pcache.rules.base import Rule, Violation
from pcache.rules.context import LintContext
from pcache.rules.slots import exact
from pcache.text.prefix import common_prefix_length

RULE = Rule(
    code="PC405",
    name="template-non-append-only",
    severity="error",
    summary="The chat template renders an earlier turn differently once it is history",
)
CAUSES = ("template",)
"""Reported where a request's cached prefix ends at this cause (`pcache.divergence`)."""


def expected_shared(ctx: LintContext) -> int:
    """Tokens of the current request a cache could reuse after the previous request of its
    session: its prompt, and on engines that cache generated tokens (vLLM, SGLang) also its
    reply."""
    current = ctx.current
    assert ctx.previous is not None
    num_tokens = len(current.token_ids)
    expected = min(len(ctx.previous.token_ids), num_tokens)
    if ctx.settings.profile.granularity in ("block", "token"):
        with_reply = min(len(ctx.previous.messages) + 1, len(current.messages))
        expected = max(expected, current.tokens_before_message(with_reply))
    return expected


def _lost(ctx: LintContext, position: int, reusable_end: int) -> int:
    """Tokens this cache would have reused up to `reusable_end` but loses from `position` on."""
    settings = ctx.settings
    size, total = settings.block_size, len(ctx.current.token_ids)
    end = min(max(reusable_end, expected_shared(ctx)), total)
    kept = reusable(settings.profile, position, total, size)
    return max(0, reusable(settings.profile, end, total, size) - kept)


def _prompt_divergence(ctx: LintContext):
    """The previous prompt, generation prompt included, must prefix the next request."""
    old_tokens, new_tokens = ctx.previous.token_ids, ctx.current.token_ids
    position = common_prefix_length(old_tokens, new_tokens)
    if position == len(old_tokens):
        return None
    lost = _lost(ctx, position, len(old_tokens))
    if not lost:
        return None
    turn = len(ctx.previous.request.messages)
    return position, lost, ctx.previous.rendered, f"turn {turn} rendered with its generation prompt"


def _may_change_as_history(message: dict) -> bool:
    """Replies whose rendering templates are known to change once they are history."""
    content = message.get("content")
    padded = isinstance(content, str) and content != content.strip()
    reasoning = any(message.get(key) for key in REASONING_KEYS)
    return bool(reasoning or message.get("tool_calls") or padded)


def _reply_divergence(ctx: LintContext):
    """The reply, rendered as the newest turn (as generated), must prefix the next request."""
    current = ctx.current
    index = len(ctx.previous.request.messages)
    reply = current.request.messages[index]
    if reply["role"] != "assistant" or not _may_change_as_history(reply):
        return None
    as_generated_ids = current.render_messages(index + 1, add_generation_prompt=False)
    position = common_prefix_length(as_generated_ids, current.token_ids)
    if position == len(as_generated_ids):
        return None
    truncated = dataclasses.replace(current.request, messages=current.request.messages[: index + 1])
    options = current.settings.options(add_generation_prompt=False)
    as_generated = render(truncated, current.settings.renderer, options)
    reply_path = current.request.source_path(f"messages[{index}]")
    ends = [
        span.end
        for span in as_generated.spans
        if span.path == reply_path or span.path.startswith((reply_path + ".", reply_path + "["))
    ]
    if not ends:
        return None
    reply_end = bisect_left(as_generated.token_starts, max(ends))
    if position >= reply_end:
        return None
    lost = _lost(ctx, position, reply_end)
    if not lost:
        return None
    return position, lost, as_generated, f"the reply of turn {index}, rendered as generated,"


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
    old_list, new_list = old_raw.get("messages") or [], new_raw.get("messages") or []
    if exact(old_list) != exact(new_list[: len(old_list)]):
        return  # same values, other bytes (PC202)
    if exact(old_raw.get("tools")) != exact(new_raw.get("tools")):
        return
    if any(old_raw.get(key) != new_raw.get(key) for key in RENDERED_PARAMETERS):
        return  # a parameter the template renders changed (PC509)
    found = _prompt_divergence(ctx) or _reply_divergence(ctx)
    if found is None:
        return
    position, _, reference, what = found
    cause = explain(reference, current.rendered, position).cause
    where = cause.b_path
    origin = f"content of {where}" if where else "template text"
    yield Violation(
        f"{what} is not a token prefix of the next request: first divergent token {position}"
        f" ({origin}: {cause.a_excerpt!r} became {cause.b_excerpt!r})",
        where or "",
        token_position=position,
        fix_title="use template flags that keep history as generated, or a patched template",
    )
