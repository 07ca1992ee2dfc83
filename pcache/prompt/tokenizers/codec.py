"""A model's text codec: its tokenizer.json, else tiktoken's cl100k for a vocabulary that large,
else UTF-8 bytes; and the chat renderer of a model that is served or prompted with text.

Every tokenizer.json pcache reads is loaded by `load_tokenizer`: the Hugging Face renderer of
`--tokenizer DIR` (lint, diff, hash, replay), `pcache generate --prompt` and `pcache serve`.
A model without a chat template of its own is rendered with `pcache.prompt.renderers.plain`'s ChatML
layout, encoded with its codec. `tokenizers` and tiktoken are imported when a codec is made.

A text prompt (a completion's `prompt`, `generate --prompt`, a `{"prompt": ...}` request) is
encoded as transformers encodes it with `add_special_tokens=True`, as vLLM does: with the
special tokens the model's tokenizer puts around a text (`PromptTokens`; Llama 3's BOS).
`encode_text_prompt` is the one function every caller encodes a text prompt with. A chat is
not: its template writes the special tokens it wants into the text.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pcache.errors import EngineError, TokenizerError
from pcache.prompt.renderers.interface import RenderOptions, WrappingRenderer
from pcache.prompt.renderers.plain import LAYOUT_VERSION, chatml_text
from pcache.prompt.renderers.rendered import Span
from pcache.prompt.shapes.request import Request

CL100K_VOCAB_SIZE = 100277
"""A model with at least this many ids gets cl100k when it has no tokenizer.json."""


def one_line(error: BaseException) -> str:
    """An error's message on one line, at most 300 characters (its type when empty)."""
    text = str(error).strip() or type(error).__name__
    return " ".join(text.split())[:300]


def load_tokenizer(path: str | Path) -> tuple[Any, bytes]:
    """A tokenizer.json set to encode as transformers encodes a chat (whole, unpadded), and
    the file's bytes."""
    from pcache.files import read_input

    data = read_input(path, what="tokenizer.json")
    return tokenizer_from_bytes(data, path), data


def tokenizer_from_bytes(data: bytes, path: str | Path) -> Any:
    """The tokenizer of tokenizer.json bytes read from `path`, set as `load_tokenizer` sets it."""
    from tokenizers import Tokenizer

    try:
        tokenizer = Tokenizer.from_str(data.decode("utf-8"))
    except Exception as error:  # the tokenizers library raises its own Exception
        raise TokenizerError(f"{path}: not a loadable tokenizer: {one_line(error)}") from None
    tokenizer.no_truncation()
    tokenizer.no_padding()
    return tokenizer


@dataclass(frozen=True, slots=True)
class PromptTokens:
    """The special token ids a model's tokenizer puts before and after a text prompt."""

    prefix: tuple[int, ...] = ()
    suffix: tuple[int, ...] = ()

    def around(self, token_ids: list[int]) -> list[int]:
        if not self.prefix and not self.suffix:
            return token_ids
        return [*self.prefix, *token_ids, *self.suffix]

    def around_starts(self, starts: list[int], length: int) -> list[int]:
        """Token starts with the added tokens': 0 before the text, its length after it."""
        return [0] * len(self.prefix) + starts + [length] * len(self.suffix)


NO_PROMPT_TOKENS = PromptTokens()

PROBE_TEXT = "a"
"""Encoded with and without special tokens to find what the post-processor adds around it."""


def prompt_tokens(tokenizer: Any) -> PromptTokens:
    """What a tokenizer.json's post-processor adds around a text (`add_special_tokens=True`;
    nothing without one). transformers 5 (vLLM's) encodes with it alone: it drops
    tokenizer_config.json's `add_bos_token` / `add_eos_token` when a tokenizer.json exists."""
    plain = tokenizer.encode(PROBE_TEXT, add_special_tokens=False).ids
    full = tokenizer.encode(PROBE_TEXT, add_special_tokens=True).ids
    for start in range(len(full) - len(plain) + 1):
        if full[start : start + len(plain)] == plain:
            return PromptTokens(tuple(full[:start]), tuple(full[start + len(plain) :]))
    raise TokenizerError(
        f"the tokenizer's post-processor does not keep a text's tokens ({plain} became {full})"
    )


def text_prompt_tokens(encoder: Any) -> PromptTokens:
    """The tokens a codec or renderer (through any wrapper) puts around a text prompt; none
    for a renderer that does not say (tiktoken encodings add none)."""
    while isinstance(encoder, WrappingRenderer):
        encoder = encoder.inner
    return getattr(encoder, "prompt_tokens", None) or NO_PROMPT_TOKENS


def encode_text_prompt(encoder: Any, text: str) -> list[int]:
    """The ids of a text prompt (not a chat): `encoder`'s encoding of the text with the
    special tokens its tokenizer adds (`add_special_tokens=True`)."""
    return text_prompt_tokens(encoder).around(encoder.encode(text))


def encode_text_prompt_with_starts(encoder: Any, text: str) -> tuple[list[int], list[int]]:
    """`encode_text_prompt`'s ids and each token's first character."""
    token_ids, starts = encoder.encode_with_starts(text)
    tokens = text_prompt_tokens(encoder)
    return tokens.around(token_ids), tokens.around_starts(starts, len(text))


class ModelCodec:
    """Text <-> token ids for a model: its tokenizer.json, else cl100k or UTF-8 bytes by vocab."""

    def __init__(self, model: str, vocab_size: int) -> None:
        self.tokenizer: Any = None
        self.encoding: Any = None
        self.prompt_tokens = NO_PROMPT_TOKENS
        tokenizer_file = Path(model) / "tokenizer.json"
        if tokenizer_file.is_file():
            self.tokenizer, _ = load_tokenizer(tokenizer_file)
            self.prompt_tokens = prompt_tokens(self.tokenizer)
        elif vocab_size >= CL100K_VOCAB_SIZE:
            from pcache.prompt.tokenizers.tiktoken_offline import get_encoding

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
        """The ids of text as it is (a rendered chat); a text prompt: `encode_text_prompt`."""
        if self.tokenizer is not None:
            return self.tokenizer.encode(text, add_special_tokens=False).ids
        if self.encoding is not None:
            return self.encoding.encode(text, disallowed_special=())
        return list(text.encode("utf-8"))

    def encode_with_starts(self, text: str) -> tuple[list[int], list[int]]:
        """Token ids and the index of each token's first character."""
        if self.tokenizer is not None:
            from pcache.prompt.tokenizers.hf_pieces import monotonic_starts

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
    """`pcache.prompt.renderers.plain`'s ChatML layout encoded with a model's codec: the chat
    format of a model without a template of its own."""

    def __init__(self, codec: ModelCodec) -> None:
        self.codec = codec
        self.name = f"chatml:{codec.name}"
        self.template_digest = hashlib.sha256(LAYOUT_VERSION.encode()).hexdigest()

    @property
    def prompt_tokens(self) -> PromptTokens:
        """What the codec's tokenizer puts around a text prompt (`encode_text_prompt`)."""
        return self.codec.prompt_tokens

    @property
    def encoder_path(self) -> str:
        """Which library encodes the text (`--verbose`)."""
        codec = self.codec
        library = "tokenizers" if codec.tokenizer is not None else codec.encoding_name
        return f"ChatML layout over {library}"

    def render_text(self, request: Request, options: RenderOptions) -> tuple[str, list[Span]]:
        return chatml_text(request, options)

    def encode(self, text: str) -> list[int]:
        return self.codec.encode(text)

    def encode_with_starts(self, text: str) -> tuple[list[int], list[int]]:
        return self.codec.encode_with_starts(text)

    def decode(self, token_ids: list[int]) -> str:
        return self.codec.decode(token_ids)
