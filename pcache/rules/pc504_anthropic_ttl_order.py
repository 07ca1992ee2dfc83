r"""## What it does
Anthropic Messages and Bedrock Converse bodies. Walks the `cache_control` markers in prefix order
(tools, system, messages, then the top-level automatic marker), or a Converse body's `cachePoint`
blocks in Bedrock's checkpoint order (toolConfig, system, messages), and reports a 1-hour marker
(`"ttl": "1h"`) that comes after a 5-minute one.

## Why is this bad?
Longer-lived breakpoints must come before shorter ones; the API rejects the request otherwise
(Bedrock: TTLs must not increase from one checkpoint to the next).

## Example
```json
{"model": "claude-sonnet-4-6", "max_tokens": 64,
 "system": [{"type": "text", "text": "Policies", "cache_control": {"type": "ephemeral"}},
            {"type": "text", "text": "Catalogue",
             "cache_control": {"type": "ephemeral", "ttl": "1h"}}],
 "messages": [{"role": "user", "content": "Hi"}]}
```

Use instead:
```json
{"model": "claude-sonnet-4-6", "max_tokens": 64,
 "system": [{"type": "text", "text": "Policies",
             "cache_control": {"type": "ephemeral", "ttl": "1h"}},
            {"type": "text", "text": "Catalogue", "cache_control": {"type": "ephemeral"}}],
 "messages": [{"role": "user", "content": "Hi"}]}
```
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from pcache.prompt.shapes.request import KIND_ANTHROPIC
from pcache.rules.base import Rule, Violation
from pcache.rules.cache_points import cache_point_ttl, is_bedrock
from pcache.rules.context import LintContext
from pcache.rules.slots import content_blocks, raw_path, resolve

RULE = Rule(
    code="PC504",
    name="anthropic-ttl-order",
    severity="error",
    summary="A 1-hour cache_control marker follows a 5-minute one",
)


def _ttl(marker: Any) -> str:
    return str(marker.get("ttl") or "5m") if isinstance(marker, dict) else "5m"


def check(ctx: LintContext) -> Iterator[Violation]:
    request = ctx.current.request
    if is_bedrock(request):  # the reader keeps cachePoints in checkpoint order
        markers = [(path, cache_point_ttl(request, path)) for path in request.breakpoints]
        yield from _first_out_of_order(request, markers, "cachePoint")
        return
    if request.kind != KIND_ANTHROPIC:
        return
    order = {path: position for position, path in enumerate(content_blocks(request))}
    markers = []
    for path in sorted(request.breakpoints, key=lambda path: order.get(path, len(order))):
        block = resolve(request.raw, path)
        if isinstance(block, dict):
            markers.append((path, _ttl(block.get("cache_control"))))
    if isinstance(request.raw.get("cache_control"), dict):
        markers.append(("cache_control", _ttl(request.raw["cache_control"])))
    yield from _first_out_of_order(request, markers, "cache_control")


def _first_out_of_order(request, markers: list[tuple[str, str]], kind: str) -> Iterator[Violation]:
    short = None
    for path, ttl in markers:
        if ttl != "1h":
            short = short or path
        elif short is not None:
            yield Violation(
                f"a 1h {kind} marker follows a 5-minute one (at {short}); longer-lived"
                " breakpoints must come first and the API rejects this order",
                raw_path(request, path),
                token_position=0,
                claims="none",
                fix_title="put 1h markers before 5-minute markers",
            )
            return
