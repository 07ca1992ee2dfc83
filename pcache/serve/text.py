"""Text in and out of the served model: chat rendering, tokenizer, streamed detokenization.

The model's codec is `pcache.prompt.tokenizers.codec`'s (`ModelCodec`); chat requests are rendered
with the model directory's own chat template (pcache's Hugging Face renderer, the one `pcache
diff` and `lint` use), and a model without one (a preset, a directory without a template) gets
the plain ChatML layout; text is encoded with the directory's tokenizer.json, else as pcache
generate does (cl100k or UTF-8 bytes). A byte-level model (a preset of 512 ids) writes the
ids above 255, which have no bytes, as `<|id|>`, so that every generated token is visible in
the streamed text.
"""

from __future__ import annotations

import codecs
from typing import Any


def chat_renderer(model: str, codec: Any) -> Any:
    """The model directory's own chat template (the Hugging Face renderer lint and diff use),
    else the ChatML layout over `codec`."""
    from pathlib import Path

    from pcache.errors import TokenizerError
    from pcache.prompt.tokenizers.codec import ChatMLRenderer

    if (Path(model) / "tokenizer.json").is_file():
        from pcache.prompt.renderers.hf_template import load_hf_renderer

        try:
            return load_hf_renderer(model)
        except TokenizerError as error:
            if "no chat template" not in str(error):
                raise
    return ChatMLRenderer(codec)


class TextCodec:
    """Renders chat messages and encodes or decodes text for one model."""

    def __init__(self, model: str, vocab_size: int) -> None:
        from pcache.prompt.tokenizers.codec import ChatMLRenderer, ModelCodec, text_prompt_tokens

        self.codec = ModelCodec(model, vocab_size)
        self.renderer = chat_renderer(model, self.codec)
        own = not isinstance(self.renderer, ChatMLRenderer)
        self.chat_template = "model" if own else "default (ChatML)"
        self.byte_level = self.codec.byte_level
        self.encoder: Any = self.codec
        """What encodes text: the model's renderer where it runs the tokenizer through
        tiktoken (the same ids, about twice as fast, and without holding the GIL the engine
        thread steps under), else the codec."""
        if getattr(self.renderer, "fast", None) is not None:
            self.encoder = self.renderer
        self.prompt_tokens = text_prompt_tokens(self.codec)
        """The special tokens a text prompt gets: the codec's, found from the same
        tokenizer.json when it loaded (the renderer would load the file again to find them)."""

    def encode(self, text: str, add_special_tokens: bool = True) -> list[int]:
        """A text prompt's ids, with the special tokens the model's tokenizer adds; without
        them (vLLM's `add_special_tokens: false`) the text's own ids (no BOS)."""
        if add_special_tokens:
            return self.prompt_tokens.around(self.encoder.encode(text))
        return self.encoder.encode(text)

    def decode(self, token_ids: list[int]) -> str:
        return self.codec.decode(token_ids)

    def token_text(self, token_id: int) -> str:
        """One token's own text, as logprobs name it: a byte-level id > 255 is `<|id|>`, a
        byte that is no character alone is `bytes:\\xNN`, as OpenAI writes partial tokens."""
        if self.byte_level:
            if token_id > 255:
                return f"<|{token_id}|>"
            return chr(token_id) if token_id < 128 else f"bytes:\\x{token_id:02x}"
        return self.codec.decode([token_id])

    def token_bytes(self, token_id: int) -> list[int]:
        """The bytes of one token (chat logprobs' `bytes`): a byte-level id is its byte."""
        if self.byte_level and token_id < 256:
            return [token_id]
        return list(self.token_text(token_id).encode())

    def detokenizer(self) -> Detokenizer | ByteDetokenizer:
        return ByteDetokenizer() if self.byte_level else Detokenizer(self)

    def render_chat(self, messages: list[dict[str, Any]], tools: list[Any] | None) -> list[int]:
        """The prompt token ids of a chat request (generation prompt appended), rendered with
        today's date where the template prints one, as vLLM and transformers render it."""
        import datetime

        from pcache.prompt.renderers.interface import RenderOptions
        from pcache.prompt.renderers.render import prompt_token_ids
        from pcache.prompt.shapes.request import request_from_document

        body: dict[str, Any] = {"messages": messages}
        if tools:
            body["tools"] = tools
        today = RenderOptions(date=datetime.date.today().isoformat())
        return prompt_token_ids(request_from_document(body, "request"), self.renderer, today)


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
