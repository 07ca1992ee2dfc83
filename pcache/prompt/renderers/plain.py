"""A plain chat layout for bare tiktoken encodings (`--tokenizer o200k_base|cl100k_base`), and
for models without a chat template of their own (`pcache.prompt.tokenizers.codec.ChatMLRenderer`).

These encodings have no chat template of their own, so pcache writes a fixed ChatML-like layout:
tools as one JSON block, then each message as `<|im_start|>{role}\\n{content}<|im_end|>\\n`,
assistant tool calls as JSON lines, and `<|im_start|>assistant\\n` as the generation prompt.
The markers are ordinary text to these encodings; only the token boundaries matter to a cache.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from pcache.prompt.renderers.interface import RenderOptions
from pcache.prompt.renderers.rendered import Span, assemble
from pcache.prompt.shapes.request import Request
from pcache.prompt.tokenizers.tiktoken_small import small_text_encoding

LAYOUT_VERSION = "plain-chatml-v1"


def dump_json(value: Any) -> str:
    """JSON as chat templates write it: key order kept, non-ASCII kept, `, ` and `: `."""
    return json.dumps(value, ensure_ascii=False)


class TiktokenEncoder:
    """Encoding helpers shared by renderers built on a tiktoken encoding."""

    encoding_name: str

    def __init__(self, encoding_name: str):
        self.encoding_name = encoding_name
        self.encoding = small_text_encoding(encoding_name)

    def encode(self, text: str) -> list[int]:
        return self.encoding.encode(text, allowed_special="all")

    def encode_with_starts(self, text: str) -> tuple[list[int], list[int]]:
        token_ids = self.encode(text)
        decoded, starts = self.encoding.decode_with_offsets(token_ids)
        assert decoded == text, "tiktoken round trip changed the text"
        return token_ids, starts

    def decode(self, token_ids: list[int]) -> str:
        return self.encoding.decode(token_ids)


class PlainRenderer(TiktokenEncoder):
    """ChatML-like layout over a bare tiktoken encoding."""

    def __init__(self, encoding_name: str):
        super().__init__(encoding_name)
        self.name = f"tiktoken:{encoding_name}"
        self.template_digest = hashlib.sha256(LAYOUT_VERSION.encode()).hexdigest()

    def render_text(self, request: Request, options: RenderOptions) -> tuple[str, list[Span]]:
        return chatml_text(request, options)


def chatml_text(request: Request, options: RenderOptions) -> tuple[str, list[Span]]:
    """The request in the ChatML-like layout, and the spans of its sources."""
    pieces: list[tuple[str, str | None]] = []
    if request.tools:
        pieces.append(("<|im_start|>tools\n[", None))
        for index, tool in enumerate(request.tools):
            if index:
                pieces.append((", ", None))
            pieces.append((dump_json(tool), f"tools[{index}]"))
        pieces.append(("]<|im_end|>\n", None))
    for index, message in enumerate(request.messages):
        pieces.append((f"<|im_start|>{message['role']}\n", None))
        content = message.get("content")
        if isinstance(content, str):
            pieces.append((content, f"messages[{index}].content"))
        for call_index, call in enumerate(message.get("tool_calls") or []):
            function = call.get("function") or {}
            path = f"messages[{index}].tool_calls[{call_index}].function"
            pieces.append(('\n{"name": ', None))
            pieces.append((dump_json(function.get("name")), f"{path}.name"))
            pieces.append((', "arguments": ', None))
            pieces.append((dump_json(function.get("arguments")), f"{path}.arguments"))
            pieces.append(("}", None))
        pieces.append(("<|im_end|>\n", None))
    if options.add_generation_prompt:
        pieces.append(("<|im_start|>assistant\n", None))
    return assemble(pieces, request)
