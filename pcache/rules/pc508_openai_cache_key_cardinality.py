r"""## What it does
OpenAI only (as PC507). Reports a `prompt_cache_key` that changes between requests of one
conversation (a key per request), and a key used by more than 15 requests within one minute
(from the requests' `timestamp`), once per key.

## Why is this bad?
The key is combined with the prefix hash to choose a machine. A new key on every request sends
each turn to a machine that never saw the conversation. Above about 15 requests per minute for
one prefix and key, traffic overflows to more machines, each a one-time miss.

## Example
```json
[
  {"session_id": "s1", "model": "gpt-5.2", "prompt_cache_key": "req-1",
   "messages": [{"role": "user", "content": "Plan a trip"}]},
  {"session_id": "s1", "model": "gpt-5.2", "prompt_cache_key": "req-2",
   "messages": [{"role": "user", "content": "Plan a trip"},
                {"role": "assistant", "content": "Where to?"},
                {"role": "user", "content": "Rome"}]}
]
```

Use instead:
```json
[
  {"session_id": "s1", "model": "gpt-5.2", "prompt_cache_key": "conv-1",
   "messages": [{"role": "user", "content": "Plan a trip"}]},
  {"session_id": "s1", "model": "gpt-5.2", "prompt_cache_key": "conv-1",
   "messages": [{"role": "user", "content": "Plan a trip"},
                {"role": "assistant", "content": "Where to?"},
                {"role": "user", "content": "Rome"}]}
]
```
Use one key per conversation or per prompt family; split a hot key (`key-0`..`key-3`).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator

from pcache.divergence.sessions import continues, distinct_conversations
from pcache.rules.base import Rule, Violation
from pcache.rules.context import LintContext
from pcache.rules.slots import openai_applies, raw_path
from pcache.text.redaction import quote

RULE = Rule(
    code="PC508",
    name="openai-cache-key-cardinality",
    severity="warning",
    summary="prompt_cache_key changes per request, or one key is used above ~15 requests/min",
)

MAX_PER_MINUTE = 15


def _key(ctx_request) -> str | None:
    key = ctx_request.raw.get("prompt_cache_key")
    return key if isinstance(key, str) and key else None


def check(ctx: LintContext) -> Iterator[Violation]:
    request = ctx.current.request
    key = _key(request)
    if key is None or not openai_applies(request, ctx.settings.profile.name):
        return
    path = raw_path(request, "prompt_cache_key")
    old_key = None
    if ctx.previous is not None:
        old_key = _key(ctx.previous.request)
    else:  # a key per request also splits the conversation into one session per key
        for head in ctx.app.other_heads(ctx.current.session)[:8]:
            other = head.context.request
            if distinct_conversations(other, request):
                continue  # explicit ids say so: another customer asking the same
            if _key(other) not in (None, key) and continues(other, request):
                old_key = _key(other)
                break
    if old_key is not None and old_key != key:
        yield Violation(
            f"prompt_cache_key changed within a conversation ({quote(old_key)} -> {quote(key)}):"
            " each request is routed as if it started a new prefix",
            path,
            token_position=0,
            claims="none",
            fix_title="use one prompt_cache_key per conversation or prompt family",
        )
        return
    if request.timestamp is None:
        return
    times = ctx.app.cache.setdefault(("PC508", key), deque())
    times.append(request.timestamp)
    while times and times[0] < request.timestamp - 60_000:
        times.popleft()
    if len(times) > MAX_PER_MINUTE and ctx.app.once(("PC508", key)):
        yield Violation(
            f"{len(times)} requests within one minute use prompt_cache_key {quote(key)} (about"
            f" {MAX_PER_MINUTE}/min per prefix and key stay on one machine)",
            path,
            token_position=0,
            claims="none",
            fix_title="split a hot key into a few keys (e.g. a suffix per user bucket)",
        )
