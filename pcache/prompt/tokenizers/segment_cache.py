"""Tokenize recurring text once: a renderer wrapper that caches pieces between special tokens.

Both tokenizer families pcache runs encode the text between two special tokens on its own:
tiktoken encodes ordinary text between the specials it is allowed to see, and `tokenizers` cuts
at its added tokens before it normalizes and pre-tokenizes (`hf_pieces`). So the token ids of a
rendered prompt are exactly the concatenation of the ids of its pieces, and templates that
separate messages with special tokens render a system prompt, a tool block or an old turn as the
same piece in every request; each distinct piece is encoded once, and the pieces a request adds
are encoded together in one batch.

Where the cuts are follows the wrapped renderer's own rule: the markers the harmony renderer
wrote (request text that looks like a marker stays ordinary text), every special token for the
plain tiktoken layouts (`allowed_special="all"`), and the tokenizer's added tokens for Hugging
Face models. A renderer whose tokenizer cannot be cut exactly is passed through unchanged.

Token starts (character offsets) are computed only when asked for. Provenance spans, when the
renderer can defer them (`render_text_deferred`), are too.
"""

from __future__ import annotations

import re
from array import array
from bisect import bisect_right
from collections import OrderedDict
from collections.abc import Callable, Sequence
from functools import cached_property
from typing import Any

from pcache.prompt.renderers.interface import (
    DeferredRenderer,
    MarkedRenderer,
    PieceRenderer,
    Renderer,
    RenderOptions,
    TiktokenRenderer,
)
from pcache.prompt.renderers.provenance import DeferredSpans
from pcache.prompt.renderers.rendered import Span
from pcache.prompt.shapes.request import Request
from pcache.prompt.tokenizers.hf_pieces import running_starts, tiktoken_byte_lengths
from pcache.prompt.tokenizers.pieces import Parts, PieceEncoder
from pcache.prompt.tokenizers.threads import ThreadedEncoder

_LENGTHS: dict[str, list[int]] = {}


def _vocabulary_lengths(encoding: Any) -> list[int]:
    """Byte length of every token id of an encoding (0 for unused ids), computed once."""
    if encoding.name not in _LENGTHS:
        _LENGTHS[encoding.name] = tiktoken_byte_lengths(encoding)
    return _LENGTHS[encoding.name]


class TiktokenPieces:
    """Pieces of a tiktoken renderer: cut at harmony's markers or at every special token."""

    def __init__(self, renderer: TiktokenRenderer):
        encoding = renderer.encoding
        self.encoding = encoding
        self._special_spans = (
            renderer.special_spans if isinstance(renderer, MarkedRenderer) else None
        )
        self._special_parts = getattr(renderer, "special_parts", None)
        """The cut of a text the renderer keeps, when it keeps them (harmony)."""
        specials = sorted(encoding.special_tokens_set, key=len, reverse=True)
        self.special_ids = {text: encoding.encode_single_token(text) for text in specials}
        self._byte_lengths: list[int] | None = None
        encode = _array_encoder(encoding)
        self.batch = ThreadedEncoder(encode, encode_batch=_batch_encoder(encoding, encode))
        """Encodes a batch of pieces into 4-byte arrays, on `batch.threads` threads."""

    @classmethod
    def of(cls, renderer: Renderer) -> TiktokenPieces | None:
        if not isinstance(renderer, TiktokenRenderer) or renderer.encoding is None:
            return None
        return cls(renderer)

    @cached_property
    def splitter(self) -> re.Pattern[str]:
        """Every special token, longest first (the plain layouts cut at each one); compiled
        when first used: harmony's pieces are cut at the markers its renderer wrote."""
        return re.compile("(" + "|".join(map(re.escape, self.special_ids)) + ")")

    def parts(self, text: str) -> Parts | None:
        if self._special_spans is None:  # plain layouts encode with every special allowed
            return self.splitter.split(text)
        if self._special_parts is not None:  # harmony: only the markers the renderer wrote
            return self._special_parts(text)
        markers = self._special_spans(text)
        if markers is None:
            return None
        parts: Parts = []
        position = 0
        for start, end in markers:
            parts += (text[position:start], text[start:end])
            position = end
        parts.append(text[position:])
        return parts

    def encode_pieces(self, pieces: list[str]) -> list[array[int]]:
        """The ids of each piece, as 4-byte arrays (the cache keeps them so)."""
        # not tiktoken's batch call: it starts a thread pool per call
        return self.batch(pieces)

    def piece_starts(self, piece: str, ids: list[int]) -> list[int]:
        if piece.isascii():  # every byte is a character: running byte lengths
            if self._byte_lengths is None:
                self._byte_lengths = _vocabulary_lengths(self.encoding)
            return running_starts(self._byte_lengths, ids)[0]
        decoded, starts = self.encoding.decode_with_offsets(ids)
        assert decoded == piece
        return starts


def _token_buffer(encoding: Any) -> Callable[[str, set[str]], Any] | None:
    """tiktoken's encoder into a buffer of 4-byte ids (text, allowed special tokens), where
    this tiktoken has it and an array of "i" items is 4 bytes; else None."""
    core = getattr(encoding, "_core_bpe", None)
    to_buffer = getattr(core, "encode_to_tiktoken_buffer", None)
    return to_buffer if array("i").itemsize == 4 else None


def _array_encoder(encoding: Any) -> Callable[[str], array[int]]:
    """`encoding.encode_ordinary` into an array of 4-byte ids: from tiktoken's token buffer
    where it has one (copied as bytes, no Python int per token), else from its list."""
    to_buffer = _token_buffer(encoding)
    if to_buffer is None:
        return lambda text: array("i", encoding.encode_ordinary(text))
    no_specials: set[str] = set()  # every special token's text is ordinary text, as there

    def encode(text: str) -> array[int]:
        try:
            buffer = to_buffer(text, no_specials)
        except UnicodeEncodeError:  # lone surrogates: replaced as `encode_ordinary` does
            text = text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
            buffer = to_buffer(text, no_specials)
        ids = array("i")
        ids.frombytes(memoryview(buffer).cast("B"))  # (its items are 4-byte unsigned ids)
        return ids

    return encode


def _batch_encoder(
    encoding: Any, encode: Callable[[str], array[int]]
) -> Callable[[list[str]], list[array[int]]] | None:
    """`encode` of each piece, in one call to tiktoken for them all: the pieces joined with a
    special token between them, that token the only special one allowed. tiktoken encodes
    the text between two allowed special tokens on its own, as `encode_ordinary` encodes a
    piece, and its Rust loop holds the GIL only to start and to return. A batch in which a
    piece spells the separator, or holds a lone surrogate, is encoded piece by piece."""
    to_buffer = _token_buffer(encoding)
    if to_buffer is None or not encoding.special_tokens_set:
        return None
    # the special token of the highest id: a reserved one where the encoding has them
    separator_id, separator = max(
        (encoding.encode_single_token(text), text) for text in encoding.special_tokens_set
    )
    allowed = {separator}
    marker = array("i", [separator_id]).tobytes()

    def encode_batch(pieces: list[str]) -> list[array[int]]:
        if len(pieces) < 2 or any(separator in piece for piece in pieces):
            return list(map(encode, pieces))
        try:
            buffer = to_buffer(separator.join(pieces), allowed)
        except UnicodeEncodeError:
            return list(map(encode, pieces))
        raw = memoryview(buffer).cast("B").tobytes()
        ids = array("i")
        ids.frombytes(raw)
        encoded = []
        start = 0
        at = 0
        for _ in range(len(pieces) - 1):
            at = raw.find(marker, at)
            while at % 4:  # (the separator's bytes across two ids)
                assert at > 0, "a separator is missing"
                at = raw.find(marker, at + 1)
            end = at // 4
            encoded.append(ids[start:end])
            start = end + 1
            at += 4
        encoded.append(ids[start:])
        return encoded

    return encode_batch


def piece_encoder_of(renderer: Renderer) -> PieceEncoder | None:
    """The renderer's own piece encoder (Hugging Face models), else tiktoken's, else None."""
    if isinstance(renderer, PieceRenderer):
        return renderer.piece_encoder()
    return TiktokenPieces.of(renderer)


class _Piece:
    """One cached piece: its ids and, once asked for, its token starts, as 4-byte arrays (a
    list of Python ints costs 9 times the memory, and the cache holds millions of tokens)."""

    __slots__ = ("ids", "starts")

    def __init__(self, ids: Sequence[int]):
        self.ids = ids if type(ids) is array else array("i", ids)
        self.starts: array[int] | None = None


class PendingPieces:
    """Texts cut at their special tokens, and the new pieces among them being encoded
    (`SegmentCachedRenderer.prefetch_later`)."""

    __slots__ = ("cuts", "encoded", "missing", "on_its_way")

    def __init__(
        self, cuts: dict[str, Parts], missing: list[str], encoded: Any, on_its_way: bool = False
    ):
        self.cuts = cuts
        self.missing = missing
        self.encoded = encoded
        """The ids of each missing piece, or (`on_its_way`) the future that gives them."""
        self.on_its_way = on_its_way


class SegmentCachedRenderer:
    """Delegates rendering; caches the encoding of each piece between special tokens.

    The pieces used last are also kept as lists (`max_listed_tokens` tokens in all): the
    prompts built from them share their int objects, so that a prompt is put together by
    copying references, and comparing two prompts over a shared piece (the longest common
    prefix) finds the items identical without comparing their values."""

    def __init__(
        self,
        renderer: Renderer,
        max_cached_tokens: int = 3_000_000,
        max_listed_tokens: int = 1 << 18,
    ):
        self.inner = renderer
        self.name = renderer.name
        self.template_digest = renderer.template_digest
        self.max_cached_tokens = max_cached_tokens
        self.cached_tokens = 0
        self.pieces: OrderedDict[str, _Piece] = OrderedDict()
        self.max_listed_tokens = max_listed_tokens
        self.listed_tokens = 0
        self.listed: OrderedDict[str, list[int]] = OrderedDict()
        """The ids of the pieces used last, as lists (most recently used last)."""
        self.hits = 0
        self.misses = 0
        self.encoder = piece_encoder_of(renderer)
        self._deferred = isinstance(renderer, DeferredRenderer)
        self.enabled = self.encoder is not None
        self._prefetched: dict[str, Parts] = {}
        """The cuts of the texts `prefetch_later` was given, until `segments` asks for them."""
        self._pending: dict[str, None] = {}
        """Pieces `prefetch_later` is encoding in the background, until `receive`."""
        self._background: Any = None

    def render_text(self, request: Request, options: RenderOptions) -> tuple[str, list[Span]]:
        return self.inner.render_text(request, options)

    def render_text_deferred(
        self, request: Request, options: RenderOptions
    ) -> tuple[str, DeferredSpans]:
        """The rendered text now, its spans when asked for (if the renderer can wait)."""
        if self._deferred:
            return self.inner.render_text_deferred(request, options)
        text, spans = self.inner.render_text(request, options)
        return text, DeferredSpans.known(text, request, spans)

    def decode(self, token_ids: list[int]) -> str:
        return self.inner.decode(token_ids)

    def set_jobs(self, jobs: int) -> None:
        """Encode a batch of new pieces on `jobs` threads (where the encoder can)."""
        batch = getattr(self.encoder, "batch", None) or getattr(
            getattr(self.encoder, "codec", None), "batch", None
        )
        if batch is not None:
            batch.threads = max(1, jobs)

    def prefetch_later(self, texts: list[str], background: bool = True) -> PendingPieces:
        """Encode the pieces of all `texts` that are not cached yet, in one batch, in two
        steps: cut `texts` and start encoding the pieces neither cached nor already on their
        way, on a background thread (`background`: the caller goes on with other work
        meanwhile) or here; `receive` then caches them, before the texts' `encode_segments`.
        The ids do not depend on where they are encoded."""
        if self.encoder is None:
            return PendingPieces({}, [], [])
        cache, pending = self.pieces, self._pending
        cuts: dict[str, Parts] = {}
        missing: dict[str, None] = {}
        for text in texts:
            parts = self.encoder.parts(text)
            if parts is not None:
                cuts[text] = parts
                missing.update(
                    (piece, None)
                    for piece in parts[::2]
                    if piece not in cache and piece not in pending
                )
        names = list(missing)
        if not names:
            return PendingPieces(cuts, names, [])
        if not background:
            return PendingPieces(cuts, names, self.encoder.encode_pieces(names))
        if self._background is None:
            from concurrent.futures import ThreadPoolExecutor

            self._background = ThreadPoolExecutor(1, thread_name_prefix="pcache-prefetch")
        pending.update(missing)
        encoding = self._background.submit(self.encoder.encode_pieces, names)
        return PendingPieces(cuts, names, encoding, on_its_way=True)

    def receive(self, pending: PendingPieces) -> None:
        """Cache the pieces `prefetch_later` encoded (waiting for them if need be); the cuts
        of its texts are kept until `segments` asks for them."""
        self._prefetched = pending.cuts
        if not pending.missing:
            return
        encoded = pending.encoded
        if pending.on_its_way:
            encoded = encoded.result()
            for piece in pending.missing:
                self._pending.pop(piece, None)
        self._insert(pending.missing, encoded)

    def close(self) -> None:
        """Stop the background thread of `prefetch_later` (a later call starts another)."""
        if self._background is not None:
            self._background.shutdown()
            self._background = None
        self._pending.clear()

    def after_fork(self) -> None:
        """In a forked child: the background thread of `prefetch_later` stayed in the parent,
        and so did what it was encoding."""
        self._background = None
        self._pending.clear()

    def segments(self, text: str) -> Parts | None:
        """The text cut where the wrapped renderer's encoder cuts it; None: not cacheable."""
        if self.encoder is None:
            return None
        parts = self._prefetched.pop(text, None)
        return parts if parts is not None else self.encoder.parts(text)

    # -- encoding --------------------------------------------------------------------------

    def encode(self, text: str) -> list[int]:
        return self.encode_segments(text)[0]

    def encode_segments(self, text: str) -> tuple[list[int], Parts | None]:
        parts = self.segments(text)
        if parts is None:
            return self.inner.encode(text), None
        assert self.encoder is not None
        special_ids = self.encoder.special_ids
        listed = self.listed
        token_ids: list[int] = []
        entries = iter(self._entries(parts[::2]))
        for index, part in enumerate(parts):
            if index % 2:
                token_ids.append(special_ids[part])
                continue
            entry = next(entries)
            if not part:
                continue
            ids = listed.get(part)
            if ids is None:
                ids = self._listed(part, entry)
            else:
                listed.move_to_end(part)
            token_ids += ids
        return token_ids, parts

    def encoded_pieces(self, text: str) -> list[tuple[Any, array[int]]] | None:
        """The text's pieces in order with their ids as arrays (no Python int per token), which
        put together are `encode_segments(text)`'s ids: an ordinary piece keyed by its text, a
        special token by its text and id. None: the text is not cut into pieces."""
        parts = self.segments(text)
        if parts is None:
            return None
        assert self.encoder is not None
        special_ids = self.encoder.special_ids
        pieces: list[tuple[Any, array[int]]] = []
        entries = iter(self._entries(parts[::2]))
        for index, part in enumerate(parts):
            if index % 2:
                special = special_ids[part]
                pieces.append(((part, special), array("i", [special])))
                continue
            entry = next(entries)
            if part:
                pieces.append((part, entry.ids))
        return pieces

    def _listed(self, piece: str, entry: _Piece) -> list[int]:
        """The piece's ids as a list, kept among the pieces used last."""
        ids = entry.ids.tolist()
        self.listed[piece] = ids
        self.listed_tokens += len(ids)
        while self.listed_tokens > self.max_listed_tokens and len(self.listed) > 1:
            _, old = self.listed.popitem(last=False)
            self.listed_tokens -= len(old)
        return ids

    def starts(self, text: str, parts: Parts | None) -> list[int]:
        """Each token's first character, for ids from `encode_segments(text)`."""
        if parts is None:
            return self.inner.encode_with_starts(text)[1]
        starts: list[int] = []
        offset = 0
        for index, part in enumerate(parts):
            if index % 2:
                starts.append(offset)
            elif part:
                piece_starts = self._starts_of(part)
                starts += map(offset.__add__, piece_starts) if offset else piece_starts
            offset += len(part)
        return starts

    def token_of_char(self, text: str, parts: Parts | None, char: int) -> int:
        """The token that holds character `char` (the last one that starts at or before it),
        computing the starts of that one piece only."""
        if parts is None:
            return max(0, bisect_right(self.starts(text, None), char) - 1)
        before = 0
        offset = 0
        for index, part in enumerate(parts):
            inside = char < offset + len(part)
            if index % 2:
                if inside:
                    return before
                before += 1
            elif part:
                if inside:
                    return max(0, before + bisect_right(self._starts_of(part), char - offset) - 1)
                before += len(self._entries([part])[0].ids)
            offset += len(part)
        return max(0, before - 1)

    def encode_with_starts(self, text: str) -> tuple[list[int], list[int]]:
        token_ids, parts = self.encode_segments(text)
        return token_ids, self.starts(text, parts)

    def _starts_of(self, piece: str) -> array[int]:
        assert self.encoder is not None
        entry = self._entries([piece])[0]
        if entry.starts is None:
            entry.starts = array("i", self.encoder.piece_starts(piece, entry.ids.tolist()))
        return entry.starts

    def _entries(self, pieces: list[str]) -> list[_Piece]:
        """The cache entry of each piece ("" included); the missing ones are encoded in one
        batch."""
        cache = self.pieces
        found = [cache.get(piece) for piece in pieces]
        missing = list(dict.fromkeys(p for p, e in zip(pieces, found, strict=True) if e is None))
        self.hits += len(pieces) - len(missing)
        for piece, entry in zip(pieces, found, strict=True):
            if entry is not None:
                cache.move_to_end(piece)  # most recently used last
        if not missing:
            return found  # type: ignore[return-value]
        assert self.encoder is not None
        new = self._insert(missing, self.encoder.encode_pieces(missing))
        return [
            new[piece] if entry is None else entry
            for piece, entry in zip(pieces, found, strict=True)
        ]

    def _insert(self, missing: list[str], encoded: Sequence[Sequence[int]]) -> dict[str, _Piece]:
        """Cache the ids of the pieces `missing` (most recently used), then forget the pieces
        used longest ago beyond `max_cached_tokens`."""
        cache = self.pieces
        new = dict(zip(missing, map(_Piece, encoded), strict=True))
        self.misses += len(missing)
        for piece, entry in new.items():
            before = cache.pop(piece, None)  # (encoded here meanwhile, for an earlier text)
            if before is not None:
                self.cached_tokens -= len(before.ids)
            cache[piece] = entry
            self.cached_tokens += len(entry.ids)
        while self.cached_tokens > self.max_cached_tokens and len(cache) > len(new):
            _, old = cache.popitem(last=False)
            self.cached_tokens -= len(old.ids)
        return new

    def check_integrity(self) -> None:
        assert self.cached_tokens == sum(len(entry.ids) for entry in self.pieces.values())
        assert self.listed_tokens == sum(map(len, self.listed.values()))
        for piece, ids in self.listed.items():
            assert piece not in self.pieces or self.pieces[piece].ids.tolist() == ids
        for entry in self.pieces.values():
            assert entry.starts is None or len(entry.starts) == len(entry.ids)
