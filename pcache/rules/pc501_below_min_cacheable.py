r"""## What it does
Measures, with the real tokenizer and template, the prefix every session of the app shares
(tools and system prompt, up to the first turn) and compares it with the profile's minimum
cacheable length (OpenAI 1024 tokens, Anthropic 1024-4096 by model, one block on vLLM).
Reported once per distinct prefix and charged, on every new session whose shared prefix stays
below the minimum, the shared tokens the cache cannot reuse. Opt-in (`--extend-select PC501`).

## Why is this bad?
Below the minimum nothing is cached: no error, no discount. The shared part is prefilled again
for every new session.

## Example
```json
{"messages": [{"role": "system", "content": "Be brief."},
              {"role": "user", "content": "Hi"}]}
```
(with `--profile openai`: 1024 tokens at least)

Use instead:
```json
{"messages": [
  {"role": "system",
   "content": "You answer questions about orders, shipping, returns and invoices. Be brief."},
  {"role": "user", "content": "Hi"}]}
```
(with `--profile vllm`: the shared prefix fills at least one block; for OpenAI, merge stable
content such as tool definitions and policies until the shared part passes 1024 tokens)
"""

from __future__ import annotations

from collections.abc import Iterator

from pcache.cache.profiles import has_model_minimums, model_entry
from pcache.rules.base import Rule, Violation
from pcache.rules.context import LintContext

RULE = Rule(
    code="PC501",
    name="below-min-cacheable",
    severity="warning",
    summary="The prefix shared by all sessions is shorter than the cache's minimum",
    default=False,
)


def minimum(ctx: LintContext) -> tuple[int, str]:
    """The profile's minimum prefix, for the request's model where the data file lists one
    (longest matching prefix of the model name), and whose figure it is."""
    profile = ctx.settings.profile
    if profile.granularity == "block":
        return ctx.settings.block_size, f"the {profile.name} profile (one block)"
    model = ctx.current.request.model
    entry = model_entry(profile.name, "min_tokens", model)
    if entry is not None:
        return max(entry[1], 1), f"{entry[0]} on the {profile.name} profile"
    if model and has_model_minimums(profile.name):
        owner = f"the {profile.name} profile (its default: {model} is not in its model table)"
    else:
        owner = f"the {profile.name} profile"
    return max(profile.min_tokens, 1), owner


def check(ctx: LintContext) -> Iterator[Violation]:
    current = ctx.current
    if not ctx.is_session_head or not current.is_chat:
        return
    first_turn = current.first_turn_index
    if first_turn == 0 and not current.request.tools:
        return  # nothing is shared by design
    shared = current.tokens_before_message(first_turn)
    floor, owner = minimum(ctx)
    if shared >= floor:
        return
    yield Violation(
        f"the prefix shared across sessions (tools + system) is {shared} tokens, below the"
        f" {floor}-token minimum of {owner}: it is never cached",
        current.request.source_path("messages[0]") if first_turn else "tools",
        token_position=0,
        claims="rounding" if ctx.cached_prefix < floor else "none",
        group=("PC501", hash(tuple(current.token_ids[:shared]))),
        fix_title="merge stable content into the shared prefix, or accept no caching",
    )
