r"""## What it does
With a block-granular engine (`--profile vllm`), measures the exact token prefix that a new
session's first request shares with the requests before it (tools, system prompt and whatever
template text follows, up to the first token that differs). When it ends inside a block, the
tokens of that partial block cannot be reused: every new session that shares the prefix
prefills them again, and each one is charged to the finding. Reported once per distinct
prefix, when a second session shows that the prefix is shared. Opt-in (`--extend-select
PC510`): a log that is perfectly append-only still pays it.

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
(with `--tokenizer o200k_base`: 36 shared tokens, up to the user's first word; 4 of them in a
partial block)

Use instead:
```json
[
  {"session_id": "s1", "messages": [{"role": "system", "content":
    "You answer questions about orders, shipping and their invoices."},
    {"role": "user", "content": "Hi"}]},
  {"session_id": "s2", "messages": [{"role": "system", "content":
    "You answer questions about orders, shipping and their invoices."},
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
    default=False,
)


def check(ctx: LintContext) -> Iterator[Violation]:
    current = ctx.current
    settings = ctx.settings
    if settings.profile.granularity != "block" or not ctx.is_session_head or not current.is_chat:
        return
    shared, size = ctx.cached_prefix, settings.block_size
    wasted = shared % size
    if shared < size or wasted == 0 or shared >= len(current.token_ids):
        return  # nothing shared yet, shared on a block boundary, or the whole prompt repeated
    where = current.rendered.token_path(shared) or ""
    yield Violation(
        f"the prefix this session shares with earlier ones is {shared} tokens and ends inside"
        f" block {shared // size}: {wasted} tokens are prefilled again by every new session"
        " that shares it",
        where,
        token_position=shared - wasted,
        claims="rounding",
        group=("PC510", hash(tuple(current.token_ids[:shared]))),
        fix_title=f"pad or trim the shared prefix to a multiple of {size} tokens",
    )
