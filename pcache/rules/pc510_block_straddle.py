r"""## What it does
With a block-granular engine (`--profile vllm`), measures where the prefix shared by all sessions
(tools and system prompt, up to the first turn) ends. When it ends inside a block, the tokens of
that partial block cannot be reused by a new session. Reported once per distinct prefix, when a
second session shows that the prefix is shared.

## Why is this bad?
vLLM caches only full blocks, so up to `block_size - 1` shared tokens are prefilled again for
every new session. The loss is small per session; padding or trimming the shared prefix to a
block boundary recovers it.

## Example
```json
[
  {"session_id": "s1", "messages": [{"role": "system", "content":
    "You answer questions about orders, shipping, returns and invoices. Be brief."},
    {"role": "user", "content": "Hi"}]},
  {"session_id": "s2", "messages": [{"role": "system", "content":
    "You answer questions about orders, shipping, returns and invoices. Be brief."},
    {"role": "user", "content": "Where is order 1182?"}]}
]
```
(with `--tokenizer o200k_base`: 28 shared tokens, 12 of them in a partial block)

Use instead:
```json
[
  {"session_id": "s1", "messages": [{"role": "system", "content":
"You answer questions about orders, shipping, returns and invoices. Be brief, polite and exact."},
    {"role": "user", "content": "Hi"}]},
  {"session_id": "s2", "messages": [{"role": "system", "content":
"You answer questions about orders, shipping, returns and invoices. Be brief, polite and exact."},
    {"role": "user", "content": "Where is order 1182?"}]}
]
```
(with `--tokenizer o200k_base`: the shared prefix is exactly two blocks)
"""

from __future__ import annotations

from collections.abc import Iterator

from pcache.rules.base import Rule, Violation
from pcache.rules.context import LintContext

RULE = Rule(
    code="PC510",
    name="block-straddle",
    severity="info",
    summary="The prefix shared by all sessions ends inside a KV block",
)


def check(ctx: LintContext) -> Iterator[Violation]:
    current = ctx.current
    settings = ctx.settings
    if settings.profile.granularity != "block" or not ctx.is_session_head or not current.is_chat:
        return
    first_turn = current.first_turn_index
    if first_turn == 0 and not current.request.tools:
        return
    shared = current.tokens_before_message(first_turn)
    size = settings.block_size
    wasted = shared % size
    if shared < size or wasted == 0:
        return
    key = ("PC510", tuple(current.token_ids[:shared]))
    if ctx.app.once(key) or not ctx.app.once((*key, "reported")):
        return  # report when a second session shares the prefix, and only then
    yield Violation(
        f"the prefix shared across sessions is {shared} tokens and ends inside block"
        f" {shared // size}: {wasted} tokens are prefilled again by every new session",
        current.request.source_path("messages[0]") if first_turn else "tools",
        token_position=shared - wasted,
        tokens_reprefilled=wasted,
        fix_title=f"pad or trim the shared prefix to a multiple of {size} tokens",
    )
