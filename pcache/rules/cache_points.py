"""Bedrock Converse `cachePoint` blocks as the breakpoint rules read them.

A `cachePoint` is a block of its own (`{"cachePoint": {"type": "default", "ttl": "1h"}}`) in
`toolConfig.tools`, `system` or a message's `content`; it caches everything before it. Its
path is in `Request.breakpoints` in prefix order (tools, system, messages), as the reader
found them. The limits (checkpoints per request, minimum tokens per checkpoint, TTLs) are the
`bedrock` profile's in `pcache/data/providers.json`.
"""

from __future__ import annotations

from typing import Any

from pcache.cache.profiles import Profile, profile_data, profile_for_model
from pcache.prompt.shapes.request import KIND_BEDROCK, Request
from pcache.rules.slots import resolve


def is_bedrock(request: Request) -> bool:
    return request.kind == KIND_BEDROCK


def bedrock_profile(request: Request) -> Profile:
    """The bedrock profile with the minimum per checkpoint of the request's model."""
    return profile_for_model("bedrock", request.model)


def cache_point_ttl(request: Request, path: str) -> str:
    """`5m` (the default) or the `ttl` the cachePoint at `path` asks for."""
    block = resolve(request.raw, path)
    marker = block.get("cachePoint") if isinstance(block, dict) else None
    ttl = marker.get("ttl") if isinstance(marker, dict) else None
    return str(ttl) if ttl else "5m"


def cached_block(request: Request, path: str) -> tuple[str, Any] | None:
    """The path and JSON of the block a cachePoint at `path` closes (the one just before it
    in its list), or None when it is the first of its list."""
    head, _, tail = path.rpartition("[")
    index = int(tail.rstrip("]"))
    if index == 0:
        return None
    before = f"{head}[{index - 1}]"
    return before, resolve(request.raw, before)


def checkpoint_blocks(request: Request) -> tuple[list[str], list[tuple[int, str]]]:
    """The content blocks in checkpoint order (tools, system, messages; a cachePoint is a
    marker, not a block) and, for each cachePoint, (position of the block it closes, its path)."""
    raw = request.raw
    blocks: list[str] = []
    points: list[tuple[int, str]] = []

    def walk(items: Any, path: str) -> None:
        for index, item in enumerate(items if isinstance(items, list) else []):
            at = f"{path}[{index}]"
            if isinstance(item, dict) and "cachePoint" in item:
                if blocks:
                    points.append((len(blocks) - 1, at))
            else:
                blocks.append(at)

    config = raw.get("toolConfig")
    walk(config.get("tools") if isinstance(config, dict) else None, "toolConfig.tools")
    walk(raw.get("system"), "system")
    for index, message in enumerate(raw.get("messages") or []):
        content = message.get("content") if isinstance(message, dict) else None
        walk(content, f"messages[{index}].content")
    return blocks, points


def bedrock_lookback(request: Request) -> int | None:
    """Blocks a Bedrock cachePoint's read looks back for an earlier write, for the models the
    data file says check preceding blocks (Claude); None for other or unknown models."""
    entry = profile_data()["profiles"]["bedrock"]
    if "lookback_blocks" not in entry or not request.model:
        return None
    tail = request.model.rsplit("/", 1)[-1].lower()  # an ARN or provider/ prefix
    names = (tail, tail.split(".", 1)[-1])  # a cross-region prefix such as us.
    prefixes = entry.get("lookback_models", {}).get("value", [])
    if not any(name.startswith(prefix) for name in names for prefix in prefixes):
        return None
    return entry["lookback_blocks"]["value"]
