"""A bundled tiktoken encoding that reads only the tokens a small text needs.

Building tiktoken's `Encoding` for o200k reads 200k ranks into its hash tables, a third of a
second: more than the rest of a `pcache diff` of two small requests. `SmallTextEncoding` encodes
ordinary text itself, as tiktoken does (the encoding's split regex, then byte-pair merges of
each piece, the adjacent pair of lowest rank first, the leftmost of equals), looking each
piece and pair up in a slot file in the user cache folder (`RankSlots`: the ranks hashed into
slots, each slot read when first asked for). Once it has encoded `SMALL_TEXT` characters, meets
a piece longer than `LONG_PIECE` bytes or is asked for anything else (batches, the vocabulary
size, special tokens it was not given), it hands over to tiktoken's own `Encoding`, loaded
then: the results are the same either way (tests/test_tiktoken_small.py).
"""

from __future__ import annotations

import marshal
import os
import tempfile
import threading
import zlib
from array import array
from functools import cache
from pathlib import Path
from typing import Any

from pcache.prompt.tokenizers.tiktoken_offline import (
    ENCODING_FILES,
    VOCABULARIES,
    _cached_ranks,
    _materialize,
    cache_dir,
    get_encoding,
)

SMALL_TEXT = 256 * 1024
"""Characters encoded here before tiktoken's own encoding takes over."""
LONG_PIECE = 256
"""A piece longer than this many bytes is left to tiktoken (merges cost its length squared)."""
SLOTS = 1 << 17
"""Hash slots of the rank file: about 1.5 tokens a slot for o200k."""
_FORMAT = b"pcache-rank-slots-1\n"


def _slot(token: bytes) -> int:
    return zlib.crc32(token) & (SLOTS - 1)


class RankSlots:
    """A vocabulary's BPE ranks on disk, hashed into `SLOTS` slots (each a marshalled dict of
    the tokens whose crc32 falls in it), read one slot at a time."""

    def __init__(self, path: Path):
        self._data = memoryview(path.read_bytes())
        header = len(_FORMAT)
        if self._data[:header] != _FORMAT or len(self._data) < header + 8 * (SLOTS + 1):
            raise ValueError(f"{path} is not a rank slot file")
        self._offsets = array("Q")
        self._offsets.frombytes(self._data[header : header + 8 * (SLOTS + 1)])
        self._slots: dict[int, dict[bytes, int]] = {}

    def get(self, token: bytes) -> int | None:
        slot = _slot(token)
        tokens = self._slots.get(slot)
        if tokens is None:
            start, end = self._offsets[slot], self._offsets[slot + 1]
            tokens = marshal.loads(self._data[start:end]) if end > start else {}
            self._slots[slot] = tokens
        return tokens.get(token)

    @staticmethod
    def write(ranks: dict[bytes, int], path: Path) -> None:
        """The slot file of `ranks`, written atomically."""
        slots: list[dict[bytes, int]] = [{} for _ in range(SLOTS)]
        for token, rank in ranks.items():
            slots[_slot(token)][token] = rank
        blobs = [marshal.dumps(tokens) if tokens else b"" for tokens in slots]
        offsets = array("Q", [0] * (SLOTS + 1))
        position = len(_FORMAT) + 8 * (SLOTS + 1)
        for index, blob in enumerate(blobs):
            offsets[index] = position
            position += len(blob)
        offsets[SLOTS] = position
        path.parent.mkdir(parents=True, exist_ok=True)
        handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
        with os.fdopen(handle, "wb") as out:
            out.write(_FORMAT)
            out.write(offsets.tobytes())
            out.writelines(blobs)
        os.replace(temporary, path)


def rank_slots(vocabulary: str) -> RankSlots:
    """The slot file of a bundled vocabulary, made from its ranks the first time."""
    file_name, expected = VOCABULARIES[vocabulary]
    path = cache_dir() / f"{file_name}.{expected[:16]}.slots"
    if path.exists():
        try:
            return RankSlots(path)
        except (OSError, ValueError):
            pass
    RankSlots.write(_cached_ranks(vocabulary, _materialize(vocabulary)), path)
    return RankSlots(path)


def _constructor_values(name: str) -> dict[str, Any]:
    """tiktoken's constructor of `name` (split regex, special tokens), its ranks left unread."""
    import tiktoken_ext.openai_public as public

    original = public.load_tiktoken_bpe
    public.load_tiktoken_bpe = lambda *args, **kwargs: {}
    try:
        return public.ENCODING_CONSTRUCTORS[name]()
    finally:
        public.load_tiktoken_bpe = original


@cache
def small_text_encoding(name: str) -> SmallTextEncoding:
    """The `SmallTextEncoding` of `name`, one per process."""
    return SmallTextEncoding(name)


class _HandOver(Exception):
    """This text is tiktoken's to encode."""


class SmallTextEncoding:
    """tiktoken's `Encoding` of a bundled vocabulary for a few small texts (`encode_ordinary`,
    `encode`, `encode_single_token`, the decoders); tiktoken's own for everything else."""

    def __init__(self, name: str):
        if name not in ENCODING_FILES:
            get_encoding(name)  # raises pcache's error for an unknown encoding
        self.name = name
        self._full: Any = None
        self._lock = threading.Lock()
        values = _constructor_values(name)
        import regex

        self._split = regex.compile(values["pat_str"]).findall
        self._specials: dict[str, int] = values["special_tokens"]
        self._special_bytes = {rank: text.encode() for text, rank in self._specials.items()}
        self._special_heads = {special[:2] for special in self._specials}
        """What every special token starts with: a text holding none of them holds none."""
        self._ranks = rank_slots(ENCODING_FILES[name])
        self._pieces: dict[bytes, list[int]] = {}
        self._bytes: dict[int, bytes] = {}
        self._encoded = 0

    # -- tiktoken's own encoding, for everything else -------------------------------------------

    @property
    def full(self) -> Any:
        """tiktoken's `Encoding`, loaded on first use; from then on every call goes to it."""
        if self._full is None:
            self._full = get_encoding(self.name)
        return self._full

    def __getattr__(self, attribute: str) -> Any:
        if attribute.startswith("__"):
            raise AttributeError(attribute)
        return getattr(self.full, attribute)

    # -- encoding -----------------------------------------------------------------------------

    def encode_ordinary(self, text: str) -> list[int]:
        if self._full is None:
            try:
                return self._encode(text)
            except _HandOver:
                pass
        return self.full.encode_ordinary(text)

    def encode(
        self, text: str, *, allowed_special: Any = frozenset(), disallowed_special: Any = "all"
    ) -> list[int]:
        """As tiktoken's: here only where no special token can be in the text (for o200k and
        cl100k, no `<|`), where it encodes as `encode_ordinary` whatever is allowed."""
        if self._full is None and not any(head in text for head in self._special_heads):
            try:
                return self._encode(text)
            except _HandOver:
                pass
        return self.full.encode(
            text, allowed_special=allowed_special, disallowed_special=disallowed_special
        )

    def encode_single_token(self, text_or_bytes: str | bytes) -> int:
        if self._full is None:
            if isinstance(text_or_bytes, str) and text_or_bytes in self._specials:
                return self._specials[text_or_bytes]
            token = text_or_bytes.encode() if isinstance(text_or_bytes, str) else text_or_bytes
            rank = self._rank(token)
            if rank is not None:
                return rank
        return self.full.encode_single_token(text_or_bytes)

    def _rank(self, token: bytes) -> int | None:
        rank = self._ranks.get(token)
        if rank is not None:
            self._bytes[rank] = token
        return rank

    def _encode(self, text: str) -> list[int]:
        with self._lock:
            self._encoded += len(text)
            if self._encoded > SMALL_TEXT:
                raise _HandOver
            ids: list[int] = []
            known = self._pieces
            for piece in self._split(text):
                try:
                    encoded = piece.encode()
                except UnicodeEncodeError:  # a lone surrogate: tiktoken replaces it
                    raise _HandOver from None
                found = known.get(encoded)
                if found is None:
                    found = known[encoded] = self._piece(encoded)
                ids += found
            return ids

    def _piece(self, piece: bytes) -> list[int]:
        rank = self._rank(piece)
        if rank is not None:
            return [rank]
        if len(piece) > LONG_PIECE:
            raise _HandOver
        return [self._rank(part) for part in _merged(piece, self._rank)]  # type: ignore[misc]

    # -- decoding -----------------------------------------------------------------------------

    def decode_tokens_bytes(self, tokens: list[int]) -> list[bytes]:
        token_bytes = self._known_bytes(tokens)
        return self.full.decode_tokens_bytes(tokens) if token_bytes is None else token_bytes

    def _known_bytes(self, tokens: list[int]) -> list[bytes] | None:
        """Each token's bytes, where every token was met here; else None."""
        if self._full is not None:
            return None
        known, specials = self._bytes, self._special_bytes
        try:
            return [known[token] if token in known else specials[token] for token in tokens]
        except KeyError:
            return None

    def decode(self, tokens: list[int], errors: str = "replace") -> str:
        token_bytes = self._known_bytes(tokens)
        if token_bytes is None:
            return self.full.decode(tokens, errors=errors)
        return b"".join(token_bytes).decode("utf-8", errors=errors)

    def decode_with_offsets(self, tokens: list[int]) -> tuple[str, list[int]]:
        """As tiktoken's (its own steps over the tokens' bytes)."""
        token_bytes = self._known_bytes(tokens)
        if token_bytes is None:
            return self.full.decode_with_offsets(tokens)
        text_len = 0
        offsets = []
        for token in token_bytes:
            offsets.append(max(0, text_len - (0x80 <= token[0] < 0xC0)))
            text_len += sum(1 for c in token if not 0x80 <= c < 0xC0)
        return b"".join(token_bytes).decode("utf-8", errors="strict"), offsets


def _merged(piece: bytes, rank_of: Any) -> list[bytes]:
    """`piece` cut by tiktoken's byte-pair merge: while some adjacent pair makes a token, the
    pair of lowest rank (the leftmost of equals) becomes one part."""
    none = 1 << 62

    def rank(start: int, end: int) -> int:
        found = rank_of(piece[start:end])
        return none if found is None else found

    bounds = list(range(len(piece) + 1))
    ranks = [rank(bounds[i], bounds[i + 2]) for i in range(len(bounds) - 2)]
    while ranks:
        lowest = min(ranks)
        if lowest == none:
            break
        i = ranks.index(lowest)
        del bounds[i + 1]
        del ranks[i]
        if i < len(ranks):
            ranks[i] = rank(bounds[i], bounds[i + 2]) if i + 2 < len(bounds) else none
        if i > 0:
            ranks[i - 1] = rank(bounds[i - 1], bounds[i + 1])
    return [piece[bounds[i] : bounds[i + 1]] for i in range(len(bounds) - 1)]
