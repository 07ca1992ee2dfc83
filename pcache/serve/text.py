"""Text in and out of the served model: chat template, tokenizer, streamed detokenization.

Chat requests are rendered with the model directory's own chat template (through pcache's
Hugging Face renderer, the one `pcache diff` and `lint` use). A model without one (a preset,
a directory without a template) gets the embedded ChatML template below. Text is encoded
with the directory's tokenizer.json, else as pcache generate does (cl100k or UTF-8 bytes).
A byte-level model (a preset of 512 ids) writes the ids above 255, which have no bytes, as
`<|id|>`, so that every generated token is visible in the streamed text.
"""

from __future__ import annotations

import codecs
from pathlib import Path
from typing import Any

from pcache.errors import TokenizerError

DEFAULT_CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "<|im_start|>{{ message['role'] }}\n{{ message['content'] }}<|im_end|>\n"
    "{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def _flat_content(message: dict[str, Any]) -> dict[str, Any]:
    content = message.get("content")
    if isinstance(content, list):
        texts = [part.get("text", "") for part in content if isinstance(part, dict)]
        content = "".join(text for text in texts if isinstance(text, str))
    return {**message, "content": "" if content is None else content}


class TextCodec:
    """Renders chat messages and encodes or decodes text for one model."""

    def __init__(self, model: str, vocab_size: int) -> None:
        from pcache.engine.generate import PromptCodec

        self.renderer = None
        if (Path(model) / "tokenizer.json").is_file():
            from pcache.prompt.hf_template import load_hf_renderer

            try:
                self.renderer = load_hf_renderer(model)
            except TokenizerError as error:
                if "no chat template" not in str(error):
                    raise
        self.codec = PromptCodec(model, vocab_size)
        self._default_template = None
        self.chat_template = "model" if self.renderer is not None else "default (ChatML)"
        self.byte_level = self.codec.tokenizer is None and self.codec.encoding is None

    def encode(self, text: str) -> list[int]:
        return self.codec.encode(text)

    def decode(self, token_ids: list[int]) -> str:
        return self.codec.decode(token_ids)

    def detokenizer(self) -> Detokenizer | ByteDetokenizer:
        return ByteDetokenizer() if self.byte_level else Detokenizer(self)

    def render_chat(self, messages: list[dict[str, Any]], tools: list[Any] | None) -> list[int]:
        """The prompt token ids of a chat request (generation prompt appended)."""
        if self.renderer is not None:
            from pcache.prompt.render import render
            from pcache.prompt.request import request_from_document

            body: dict[str, Any] = {"messages": messages}
            if tools:
                body["tools"] = tools
            request = request_from_document(body, "request")
            return list(render(request, self.renderer).token_ids)
        if self._default_template is None:
            from pcache.prompt.chat_jinja import make_environment

            self._default_template = make_environment().from_string(DEFAULT_CHAT_TEMPLATE)
        text = self._default_template.render(
            messages=[_flat_content(message) for message in messages],
            add_generation_prompt=True,
        )
        return self.encode(text)


class Detokenizer:
    """The text of a growing list of token ids, handed out as deltas. Each step decodes a
    short window (the tokens of the last emitted delta, for context, and those after them),
    so a long answer costs linear time; a trailing partial character (U+FFFD) is held back
    until the token that completes it arrives."""

    def __init__(self, codec: TextCodec) -> None:
        self.codec = codec
        self.token_ids: list[int] = []
        self.prefix_offset = 0  # the window's start (context, already emitted)
        self.read_offset = 0  # the tokens before this are emitted

    def push(self, token_id: int, final: bool = False) -> str:
        self.token_ids.append(token_id)
        return self.flush() if final else self._delta(hold_back=True)

    def flush(self) -> str:
        return self._delta(hold_back=False)

    def _delta(self, hold_back: bool) -> str:
        decode = self.codec.decode
        emitted = decode(self.token_ids[self.prefix_offset : self.read_offset])
        text = decode(self.token_ids[self.prefix_offset :])
        if len(text) <= len(emitted) or (hold_back and text.endswith("\ufffd")):
            return ""
        self.prefix_offset = self.read_offset
        self.read_offset = len(self.token_ids)
        return text[len(emitted) :]


class ByteDetokenizer:
    """Streamed UTF-8 of byte-level ids: incomplete characters wait for their next byte,
    invalid bytes become U+FFFD at once, ids without a byte are written `<|id|>`."""

    def __init__(self) -> None:
        self.decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")

    def push(self, token_id: int, final: bool = False) -> str:
        data = bytes((token_id,)) if token_id < 256 else f"<|{token_id}|>".encode()
        return self.decoder.decode(data, final)

    def flush(self) -> str:
        return self.decoder.decode(b"", True)
