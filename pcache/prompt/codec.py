"""A model's text codec: its tokenizer.json, else tiktoken's cl100k for a vocabulary that large,
else UTF-8 bytes; and the chat renderer of a model that is served or prompted with text.

Every tokenizer.json pcache reads is loaded by `load_tokenizer`: the Hugging Face renderer of
`--tokenizer DIR` (lint, diff, hash, replay), `pcache generate --prompt` and `pcache serve`.
A model without a chat template of its own is rendered with `pcache.prompt.plain`'s ChatML
layout, encoded with its codec. `tokenizers` and tiktoken are imported when a codec is made.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from pcache.errors import EngineError, TokenizerError
from pcache.prompt.plain import LAYOUT_VERSION, chatml_text
from pcache.prompt.rendered import Span
from pcache.prompt.request import Request
from pcache.prompt.tokenizer import RenderOptions

CL100K_VOCAB_SIZE = 100277
"""A model with at least this many ids gets cl100k when it has no tokenizer.json."""


def one_line(error: BaseException) -> str:
    """An error's message on one line, at most 300 characters (its type when empty)."""
    text = str(error).strip() or type(error).__name__
    return " ".join(text.split())[:300]


def load_tokenizer(path: str | Path) -> tuple[Any, bytes]:
    """A tokenizer.json set to encode as transformers encodes a chat (whole, unpadded), and
    the file's bytes."""
    from tokenizers import Tokenizer

    from pcache.files import read_input

    data = read_input(path, what="tokenizer.json")
    try:
        tokenizer = Tokenizer.from_str(data.decode("utf-8"))
    except Exception as error:  # the tokenizers library raises its own Exception
        raise TokenizerError(f"{path}: not a loadable tokenizer: {one_line(error)}") from None
    tokenizer.no_truncation()
    tokenizer.no_padding()
    return tokenizer, data


class ModelCodec:
    """Text <-> token ids for a model: its tokenizer.json, else cl100k or UTF-8 bytes by vocab."""

    def __init__(self, model: str, vocab_size: int) -> None:
        self.tokenizer: Any = None
        self.encoding: Any = None
        tokenizer_file = Path(model) / "tokenizer.json"
        if tokenizer_file.is_file():
            self.tokenizer, _ = load_tokenizer(tokenizer_file)
        elif vocab_size >= CL100K_VOCAB_SIZE:
            from pcache.prompt.tiktoken_offline import get_encoding

            self.encoding = get_encoding("cl100k_base")
        elif vocab_size < 256:
            raise EngineError(f"{model}: no tokenizer for --prompt; use --prompt-ids")
        self.name = f"{'tokenizer' if self.tokenizer else self.encoding_name}:{model}"

    @property
    def encoding_name(self) -> str:
        return "cl100k_base" if self.encoding is not None else "utf-8"

    @property
    def byte_level(self) -> bool:
        """Token ids are UTF-8 bytes (ids above 255 have none)."""
        return self.tokenizer is None and self.encoding is None

    def encode(self, text: str) -> list[int]:
        if self.tokenizer is not None:
            return self.tokenizer.encode(text, add_special_tokens=False).ids
        if self.encoding is not None:
            return self.encoding.encode(text, disallowed_special=())
        return list(text.encode("utf-8"))

    def encode_with_starts(self, text: str) -> tuple[list[int], list[int]]:
        """Token ids and the index of each token's first character."""
        if self.tokenizer is not None:
            from pcache.prompt.hf_pieces import monotonic_starts

            encoding = self.tokenizer.encode(text, add_special_tokens=False)
            return encoding.ids, monotonic_starts(encoding.offsets)
        if self.encoding is not None:
            token_ids = self.encode(text)
            return token_ids, self.encoding.decode_with_offsets(token_ids)[1]
        starts = [index for index, char in enumerate(text) for _ in char.encode("utf-8")]
        return list(text.encode("utf-8")), starts

    def decode(self, token_ids: list[int]) -> str:
        if self.tokenizer is not None:
            return self.tokenizer.decode(token_ids)
        if self.encoding is not None:
            return self.encoding.decode([t for t in token_ids if t < self.encoding.n_vocab])
        return bytes(t for t in token_ids if t < 256).decode("utf-8", errors="replace")


class ChatMLRenderer:
    """`pcache.prompt.plain`'s ChatML layout encoded with a model's codec: the chat format of a
    model without a template of its own."""

    def __init__(self, codec: ModelCodec) -> None:
        self.codec = codec
        self.name = f"chatml:{codec.name}"
        self.template_digest = hashlib.sha256(LAYOUT_VERSION.encode()).hexdigest()

    def render_text(self, request: Request, options: RenderOptions) -> tuple[str, list[Span]]:
        return chatml_text(request, options)

    def encode(self, text: str) -> list[int]:
        return self.codec.encode(text)

    def encode_with_starts(self, text: str) -> tuple[list[int], list[int]]:
        return self.codec.encode_with_starts(text)

    def decode(self, token_ids: list[int]) -> str:
        return self.codec.decode(token_ids)
