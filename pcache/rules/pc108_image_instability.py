r"""## What it does
Looks at the images of a request. One request: an image URL signed to expire (`X-Amz-Signature`,
`Expires=`, `sig=`...) is a suspicion (warning): the next request will carry a newly signed URL.
Within a session: an image of the history whose URL or bytes, or whose `detail`, differ from the
previous request, or images added to or removed from earlier messages, are reported (error).

## Why is this bad?
Images are part of the cached prefix (OpenAI hashes the image and its `detail`; Anthropic
invalidates the messages level when images change; vLLM hashes image content into its blocks).
A re-signed or re-encoded image is a new prefix from that message on.

## Example
```json
[
  {"session_id": "s1", "messages": [{"role": "user", "content": [
    {"type": "text", "text": "What is in this photo?"},
    {"type": "image_url",
     "image_url": {"url": "https://cdn.example.com/a.png", "detail": "high"}}]}]},
  {"session_id": "s1", "messages": [{"role": "user", "content": [
    {"type": "text", "text": "What is in this photo?"},
    {"type": "image_url",
     "image_url": {"url": "https://cdn.example.com/a.png", "detail": "low"}}]},
    {"role": "assistant", "content": "A cat."}, {"role": "user", "content": "Its color?"}]}
]
```

Use instead:
```json
[
  {"session_id": "s1", "messages": [{"role": "user", "content": [
    {"type": "text", "text": "What is in this photo?"},
    {"type": "image_url",
     "image_url": {"url": "https://cdn.example.com/a.png", "detail": "high"}}]}]},
  {"session_id": "s1", "messages": [{"role": "user", "content": [
    {"type": "text", "text": "What is in this photo?"},
    {"type": "image_url",
     "image_url": {"url": "https://cdn.example.com/a.png", "detail": "high"}}]},
    {"role": "assistant", "content": "A cat."}, {"role": "user", "content": "Its color?"}]}
]
```
Use stable URLs or file ids; encode an image once and replay the same bytes and `detail`.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from pcache.rules.base import Rule, Violation
from pcache.rules.context import LintContext
from pcache.rules.slots import raw_path
from pcache.text.redaction import quote

RULE = Rule(
    code="PC108",
    name="image-instability",
    severity="error",
    summary="Images in the prefix change between requests (signed URLs, re-encoding, detail)",
)
CAUSES = ("image",)
"""Reported where a request's cached prefix ends at this cause (`pcache.divergence`); the
check below reports what a provider sees that the rendered tokens may not show."""

IMAGE_TYPES = ("image_url", "input_image", "image")
SIGNED = re.compile(
    r"[?&](?:X-Amz-Signature|X-Amz-Expires|X-Goog-Signature|X-Goog-Expires|Expires|Signature"
    r"|sig|se|st|token|exp|expires)=",
    re.IGNORECASE,
)


def _images(message: Any) -> list[tuple[int, str, Any]]:
    """(block index, source, detail) of each image block of a raw message."""
    content = message.get("content") if isinstance(message, dict) else None
    if not isinstance(content, list):
        return []
    images = []
    for index, block in enumerate(content):
        if not isinstance(block, dict):
            continue
        if block.get("type") in ("image_url", "input_image"):
            image = block.get("image_url")
            url = image.get("url") if isinstance(image, dict) else image
            detail = image.get("detail") if isinstance(image, dict) else block.get("detail")
            images.append((index, str(url), detail))
        elif block.get("type") == "image" and isinstance(block.get("source"), dict):
            source = block["source"]
            images.append((index, str(source.get("url") or source.get("data")), None))
    return images


def _text(message: Any) -> Any:
    """A raw message without its image blocks (a retried turn has other text)."""
    content = message.get("content") if isinstance(message, dict) else None
    if not isinstance(content, list):
        return content
    return [
        block
        for block in content
        if not (isinstance(block, dict) and block.get("type") in IMAGE_TYPES)
    ]


def _describe(url: str) -> str:
    return "inline bytes" if url.startswith("data:") or "/" not in url else url.split("?")[0]


def check(ctx: LintContext) -> Iterator[Violation]:
    request = ctx.current.request
    raw_messages = request.raw.get("messages")
    if not isinstance(raw_messages, list):
        return
    old_messages = ctx.previous.request.raw.get("messages") if ctx.previous else None
    start = 0
    if isinstance(old_messages, list) and raw_messages[: len(old_messages)] == old_messages:
        start = len(old_messages)  # history as sent before (compared at C speed): seen already
    for index in range(start, len(raw_messages)):
        message = raw_messages[index]
        images = _images(message)
        if (
            isinstance(old_messages, list)
            and index < len(old_messages)
            and _text(old_messages[index]) == _text(message)
        ):
            old = _images(old_messages[index])
            path = raw_path(request, f"messages[{index}].content")
            if [(u, d) for _, u, d in old] != [(u, d) for _, u, d in images]:
                yield _changed(request, index, old, images, path)
                return
        for block, url, _ in images:
            if SIGNED.search(url) and ctx.app.once(("PC108", url.split("?")[0])):
                yield Violation(
                    f"image URL {quote(_describe(url))} is signed to expire: when it is signed"
                    " again the prefix changes from this message on",
                    raw_path(request, f"messages[{index}].content[{block}]"),
                    severity="warning",
                    hint=True,
                    fix_title="use a stable URL or a file id for images in the conversation",
                )


def _changed(request, index, old, images, path) -> Violation:
    if len(old) != len(images):
        what = f"images were {'added to' if len(images) > len(old) else 'removed from'}"
        return Violation(
            f"{what} message {index} since the previous request",
            path,
            fix_title="keep the images of earlier messages as they were sent",
        )
    for (block, url, detail), (_, old_url, old_detail) in zip(images, old, strict=True):
        if url != old_url or detail != old_detail:
            what = (
                f"detail changed from {quote(old_detail)} to {quote(detail)}"
                if url == old_url
                else "was re-signed or re-encoded (same position, other URL or bytes)"
            )
            return Violation(
                f"image in message {index} {what} since the previous request",
                f"{path}[{block}]",
                fix_title="replay the same image URL or bytes and the same detail",
            )
    raise AssertionError("images compared unequal but no block differs")
