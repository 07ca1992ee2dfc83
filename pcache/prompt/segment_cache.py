"""Tokenize recurring text once: a renderer wrapper that caches pieces between special tokens.

tiktoken splits text at special tokens before anything else and encodes the ordinary text
between two special tokens on its own, so the token ids of `text` are exactly the concatenation
of the ids of its pieces. Templates that separate messages with special tokens (harmony's
`<|start|>`, `<|message|>`, `<|end|>`) therefore render a system prompt, a tool block or an old
turn as the same piece in every request; each distinct piece is encoded once. Renderers without
a tiktoken encoding are passed through unchanged.
"""

from __future__ import annotations

import re
from array import array
from collections import OrderedDict
from itertools import accumulate
from typing import Any

from pcache.prompt.rendered import Span
from pcache.prompt.request import Request
from pcache.prompt.tokenizer import RenderOptions

_LENGTHS: dict[str, Any] = {}


def _vocabulary_lengths(encoding: Any) -> Any:
    """Byte length of every token id of an encoding (0 for unused ids), computed once."""
    if encoding.name not in _LENGTHS:
        lengths = [0] * (encoding.max_token_value + 1)
        for token in range(encoding.max_token_value + 1):
            try:
                lengths[token] = len(encoding.decode_single_token_bytes(token))
            except KeyError:
                continue
        _LENGTHS[encoding.name] = lengths
    return _LENGTHS[encoding.name]


class SegmentCachedRenderer:
    """Delegates rendering; caches the encoding of each piece between special tokens."""

    def __init__(self, renderer: Any, max_cached_tokens: int = 8_000_000):
        self.inner = renderer
        self.name = renderer.name
        self.template_digest = renderer.template_digest
        self.max_cached_tokens = max_cached_tokens
        self.cached_tokens = 0
        self.pieces: OrderedDict[str, tuple[array, array]] = OrderedDict()
        self.hits = 0
        self.misses = 0
        encoding = getattr(renderer, "encoding", None)
        self.encoding = encoding
        self.enabled = encoding is not None and hasattr(encoding, "special_tokens_set")
        if self.enabled:
            specials = sorted(encoding.special_tokens_set, key=len, reverse=True)
            self.special_ids = {text: encoding.encode_single_token(text) for text in specials}
            self.splitter = re.compile("(" + "|".join(map(re.escape, specials)) + ")")
            self._byte_lengths: Any = None

    def render_text(self, request: Request, options: RenderOptions) -> tuple[str, list[Span]]:
        return self.inner.render_text(request, options)

    def encode(self, text: str) -> list[int]:
        return self.encode_with_starts(text)[0]

    def decode(self, token_ids: list[int]) -> str:
        return self.inner.decode(token_ids)

    def encode_with_starts(self, text: str) -> tuple[list[int], list[int]]:
        if not self.enabled:
            return self.inner.encode_with_starts(text)
        token_ids: list[int] = []
        starts: list[int] = []
        offset = 0
        for index, piece in enumerate(self.splitter.split(text)):
            if not piece:
                continue
            if index % 2:
                token_ids.append(self.special_ids[piece])
                starts.append(offset)
            else:
                ids, piece_starts = self._piece(piece)
                token_ids.extend(ids)
                starts.extend(
                    [start + offset for start in piece_starts] if offset else piece_starts
                )
            offset += len(piece)
        return token_ids, starts

    def _piece(self, piece: str) -> tuple[array, array]:
        cached = self.pieces.get(piece)
        if cached is not None:
            self.hits += 1
            self.pieces.move_to_end(piece)
            return cached
        self.misses += 1
        ids = self.encoding.encode_ordinary(piece)
        if piece.isascii():
            starts = self._ascii_starts(ids)
        else:
            decoded, starts = self.encoding.decode_with_offsets(ids)
            assert decoded == piece
        entry = (array("I", ids), array("I", starts))
        self.pieces[piece] = entry
        self.cached_tokens += len(ids)
        while self.cached_tokens > self.max_cached_tokens and len(self.pieces) > 1:
            _, (old_ids, _) = self.pieces.popitem(last=False)
            self.cached_tokens -= len(old_ids)
        return entry

    def _ascii_starts(self, ids: list[int]) -> list[int]:
        """For ASCII text every byte is a character: starts are the running byte lengths."""
        if self._byte_lengths is None:
            self._byte_lengths = _vocabulary_lengths(self.encoding)
        starts = list(accumulate(map(self._byte_lengths.__getitem__, ids), initial=0))
        starts.pop()
        return starts

    def check_integrity(self) -> None:
        assert self.cached_tokens == sum(len(ids) for ids, _ in self.pieces.values())
        assert all(len(ids) == len(starts) for ids, starts in self.pieces.values())
