"""Tokenize recurring text once: a renderer wrapper that caches pieces between special tokens.

tiktoken encodes the ordinary text between two special tokens on its own, so the token ids of a
rendered prompt are exactly the concatenation of the ids of its pieces. Templates that separate
messages with special tokens (harmony's `<|start|>`, `<|message|>`, `<|end|>`) therefore render a
system prompt, a tool block or an old turn as the same piece in every request; each distinct
piece is encoded once. Where the special tokens are follows the wrapped renderer's own rule:
the markers the harmony renderer wrote (request text that looks like a marker stays ordinary
text), or every special token for the plain layouts (tiktoken's `allowed_special="all"`).
Renderers without a tiktoken encoding are passed through unchanged.

Token starts (character offsets) are computed only when asked for.
"""

from __future__ import annotations

import re
from collections import OrderedDict
from itertools import accumulate
from typing import Any

from pcache.prompt.rendered import Span
from pcache.prompt.request import Request
from pcache.prompt.tokenizer import RenderOptions

_LENGTHS: dict[str, list[int]] = {}

Segment = tuple[int, str, int | None]
"""(character offset, text, special token id or None for ordinary text)."""


def _vocabulary_lengths(encoding: Any) -> list[int]:
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


class _Piece:
    __slots__ = ("ids", "starts")

    def __init__(self, ids: list[int]):
        self.ids = ids
        self.starts: list[int] | None = None


class SegmentCachedRenderer:
    """Delegates rendering; caches the encoding of each piece between special tokens."""

    def __init__(self, renderer: Any, max_cached_tokens: int = 3_000_000):
        self.inner = renderer
        self.name = renderer.name
        self.template_digest = renderer.template_digest
        self.max_cached_tokens = max_cached_tokens
        self.cached_tokens = 0
        self.pieces: OrderedDict[str, _Piece] = OrderedDict()
        self.hits = 0
        self.misses = 0
        encoding = getattr(renderer, "encoding", None)
        self.encoding = encoding
        self.enabled = encoding is not None and hasattr(encoding, "special_tokens_set")
        self._special_spans = getattr(renderer, "special_spans", None)
        if self.enabled:
            specials = sorted(encoding.special_tokens_set, key=len, reverse=True)
            self.special_ids = {text: encoding.encode_single_token(text) for text in specials}
            self.splitter = re.compile("|".join(map(re.escape, specials)))
            self._byte_lengths: list[int] | None = None

    def render_text(self, request: Request, options: RenderOptions) -> tuple[str, list[Span]]:
        return self.inner.render_text(request, options)

    def decode(self, token_ids: list[int]) -> str:
        return self.inner.decode(token_ids)

    # -- splitting -------------------------------------------------------------------------

    def segments(self, text: str) -> list[Segment] | None:
        """The text cut where the wrapped renderer's encoder cuts it; None: not cacheable."""
        if not self.enabled:
            return None
        if self._special_spans is not None:  # harmony: only the markers the renderer wrote
            markers = self._special_spans(text)
            if markers is None:
                return None
            cuts = [(start, end, text[start:end]) for start, end in markers]
        else:  # plain layouts encode with every special token allowed
            cuts = [(m.start(), m.end(), m.group(0)) for m in self.splitter.finditer(text)]
        result: list[Segment] = []
        position = 0
        for start, end, special in cuts:
            if start > position:
                result.append((position, text[position:start], None))
            result.append((start, special, self.special_ids[special]))
            position = end
        if position < len(text):
            result.append((position, text[position:], None))
        return result

    # -- encoding --------------------------------------------------------------------------

    def encode(self, text: str) -> list[int]:
        return self.encode_segments(text)[0]

    def encode_segments(self, text: str) -> tuple[list[int], list[Segment] | None]:
        segments = self.segments(text)
        if segments is None:
            return self.inner.encode(text), None
        token_ids: list[int] = []
        for _, piece, special in segments:
            if special is not None:
                token_ids.append(special)
            else:
                token_ids += self._piece(piece).ids
        return token_ids, segments

    def starts(self, text: str, segments: list[Segment] | None) -> list[int]:
        """Each token's first character, for ids from `encode_segments(text)`."""
        if segments is None:
            return self.inner.encode_with_starts(text)[1]
        starts: list[int] = []
        for offset, piece, special in segments:
            if special is not None:
                starts.append(offset)
                continue
            entry = self._piece(piece)
            if entry.starts is None:
                entry.starts = self._piece_starts(piece, entry.ids)
            starts += map(offset.__add__, entry.starts) if offset else entry.starts
        return starts

    def encode_with_starts(self, text: str) -> tuple[list[int], list[int]]:
        token_ids, segments = self.encode_segments(text)
        return token_ids, self.starts(text, segments)

    def _piece(self, piece: str) -> _Piece:
        entry = self.pieces.get(piece)
        if entry is not None:
            self.hits += 1
            self.pieces.move_to_end(piece)
            return entry
        self.misses += 1
        entry = _Piece(self.encoding.encode_ordinary(piece))
        self.pieces[piece] = entry
        self.cached_tokens += len(entry.ids)
        while self.cached_tokens > self.max_cached_tokens and len(self.pieces) > 1:
            _, old = self.pieces.popitem(last=False)
            self.cached_tokens -= len(old.ids)
        return entry

    def _piece_starts(self, piece: str, ids: list[int]) -> list[int]:
        if piece.isascii():  # every byte is a character: running byte lengths
            if self._byte_lengths is None:
                self._byte_lengths = _vocabulary_lengths(self.encoding)
            starts = list(accumulate(map(self._byte_lengths.__getitem__, ids), initial=0))
            starts.pop()
            return starts
        decoded, starts = self.encoding.decode_with_offsets(ids)
        assert decoded == piece
        return starts

    def check_integrity(self) -> None:
        assert self.cached_tokens == sum(len(entry.ids) for entry in self.pieces.values())
        for entry in self.pieces.values():
            assert entry.starts is None or len(entry.starts) == len(entry.ids)
