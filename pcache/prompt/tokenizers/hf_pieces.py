"""Where a Hugging Face tokenizer cuts text, so each piece between cuts can be encoded once.

`tokenizers` encodes in two steps: it first cuts the text at its added tokens whose `normalized`
flag is off (leftmost-longest match, special or not; special ones stay text when
`encode_special_tokens` is set), then normalizes, pre-tokenizes and encodes every piece between
two cuts on its own. The ids of a text are therefore the concatenation of the ids of its
pieces, and a system prompt or an old turn that a template writes between the same two tokens
is the same piece in every request.

That holds only when the cut tokens match without context (no `lstrip`, `rstrip` or
`single_word`) and no pre-tokenizer looks at where a piece sits in the whole text (Metaspace's
`prepend_scheme: first` adds its prefix to the first piece only). `HFPieces.of` returns None for
any other tokenizer; the caller then encodes whole texts.
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Callable
from itertools import accumulate
from typing import Any

from pcache.prompt.tokenizers.pieces import Parts
from pcache.prompt.tokenizers.threads import ThreadedEncoder


class HFPieces:
    """Cuts text at a tokenizer's non-normalized added tokens; encodes the pieces between with
    `codec` (`tokenizers` itself, or tiktoken where it is exact: `TiktokenCodec`)."""

    def __init__(self, codec: Any, matched: list[str], cut_ids: dict[str, int]):
        self.codec = codec
        self.special_ids = cut_ids
        self.splitter = re.compile(f"({longest_match_pattern(matched)})") if matched else None
        self.every_match_cuts = len(cut_ids) == len(matched)

    @property
    def tokenizer(self) -> Any:
        return self.codec.tokenizer

    @classmethod
    def of(cls, tokenizer: Any) -> HFPieces | None:
        """The piece encoder of `tokenizer`, or None when pieces cannot be encoded apart."""
        if tokenizer.pre_tokenizer is not None and _pre_tokenizer_sees_position(
            json.loads(tokenizer.pre_tokenizer.__getstate__())
        ):
            return None
        added = [
            {
                "content": token.content,
                "id": tokenizer.token_to_id(token.content),
                "special": token.special,
                "normalized": token.normalized,
                "lstrip": token.lstrip,
                "rstrip": token.rstrip,
                "single_word": token.single_word,
            }
            for token in tokenizer.get_added_tokens_decoder().values()
        ]
        return cls.of_added(TokenizersCodec(tokenizer), added, tokenizer.encode_special_tokens)

    @classmethod
    def of_added(
        cls, codec: Any, added: list[dict[str, Any]], text_specials: bool = False
    ) -> HFPieces | None:
        """The piece encoder over `codec` that cuts at the added tokens (as tokenizer.json
        lists them); None when one of them matches only in context."""
        matched: list[str] = []
        cut_ids: dict[str, int] = {}
        for token in added:
            if token.get("normalized") or not token.get("content"):
                continue
            if token.get("lstrip") or token.get("rstrip") or token.get("single_word"):
                return None
            matched.append(token["content"])
            if not (token.get("special") and text_specials):
                cut_ids[token["content"]] = token["id"]
        return cls(codec, matched, cut_ids)

    def parts(self, text: str) -> Parts:
        """The text cut at its added tokens. A special token read as text
        (`encode_special_tokens`) is still matched, as the tokenizer matches it, but stays
        inside its piece."""
        if self.splitter is None:
            return [text]
        parts = self.splitter.split(text)
        if self.every_match_cuts:
            return parts
        merged = [parts[0]]
        for index in range(1, len(parts), 2):
            if parts[index] in self.special_ids:
                merged += parts[index : index + 2]
            else:
                merged[-1] += parts[index] + parts[index + 1]
        return merged

    def encode_pieces(self, pieces: list[str]) -> list[list[int]]:
        """Ids of each piece, in one batch."""
        return self.codec.encode_pieces(pieces)

    def piece_starts(self, piece: str, ids: list[int]) -> list[int]:
        """Each token's first character in `piece` (never before the previous token's)."""
        return self.codec.piece_starts(piece, ids)

    def encode(self, text: str) -> list[int]:
        """The ids of a whole text: its pieces' ids with the cut tokens' ids between."""
        parts = self.parts(text)
        pieces = list(dict.fromkeys(part for part in parts[::2] if part))
        ids_of = dict(zip(pieces, self.encode_pieces(pieces), strict=True))
        token_ids: list[int] = []
        for index, part in enumerate(parts):
            if index % 2:
                token_ids.append(self.special_ids[part])
            elif part:
                token_ids += ids_of[part]
        return token_ids

    def encode_with_starts(self, text: str) -> tuple[list[int], list[int]]:
        parts = self.parts(text)
        token_ids: list[int] = []
        starts: list[int] = []
        offset = 0
        for index, part in enumerate(parts):
            if index % 2:
                token_ids.append(self.special_ids[part])
                starts.append(offset)
            elif part:
                ids = self.encode_pieces([part])[0]
                token_ids += ids
                starts += (offset + start for start in self.piece_starts(part, ids))
            offset += len(part)
        return token_ids, starts


class TokenizersCodec:
    """Pieces encoded by `tokenizers` (its batch call runs on its own threads)."""

    def __init__(self, tokenizer: Any):
        self.tokenizer = tokenizer
        self._byte_lengths: list[int] | None = None
        self._ascii_offsets = _offsets_are_byte_lengths(tokenizer)

    def encode_pieces(self, pieces: list[str]) -> list[list[int]]:
        """Ids of each piece, in one batch (threads; no offsets, which cost time)."""
        encodings = self.tokenizer.encode_batch_fast(pieces, add_special_tokens=False)
        return [encoding.ids for encoding in encodings]

    def piece_starts(self, piece: str, ids: list[int]) -> list[int]:
        if self._ascii_offsets and piece.isascii():  # a byte is a character
            if self._byte_lengths is None:
                self._byte_lengths = _byte_lengths(self.tokenizer)
            starts, end = running_starts(self._byte_lengths, ids)
            if end == len(piece):
                return starts
        encoding = self.tokenizer.encode(piece, add_special_tokens=False)
        assert encoding.ids == ids
        return monotonic_starts(encoding.offsets)


class TiktokenCodec:
    """Pieces encoded by tiktoken over a converted tokenizer.json (`tiktoken_bpe`), NFC first
    when the tokenizer normalizes so. `reference` loads the `tokenizers` tokenizer, needed only
    for the starts of a piece that NFC changes."""

    def __init__(self, encoding: Any, nfc: bool, reference: Callable[[], Any]):
        self.encoding = encoding
        self.nfc = nfc
        self.reference = reference
        self.batch = ThreadedEncoder(encoding.encode_ordinary)
        """Encodes a batch of pieces, on `batch.threads` threads."""
        self._byte_lengths: list[int] | None = None

    @property
    def tokenizer(self) -> Any:
        return self.reference()

    def normalized(self, piece: str) -> str:
        if self.nfc and not piece.isascii():
            return unicodedata.normalize("NFC", piece)
        return piece

    def encode_pieces(self, pieces: list[str]) -> list[list[int]]:
        if self.nfc:
            pieces = [self.normalized(piece) for piece in pieces]
        return self.batch(pieces)

    def piece_starts(self, piece: str, ids: list[int]) -> list[int]:
        if piece.isascii():  # every byte is a character: running byte lengths
            if self._byte_lengths is None:
                self._byte_lengths = tiktoken_byte_lengths(self.encoding)
            return running_starts(self._byte_lengths, ids)[0]
        if self.normalized(piece) != piece:  # offsets into the original text: tokenizers'
            encoding = self.reference().encode(piece, add_special_tokens=False)
            assert encoding.ids == ids
            return monotonic_starts(encoding.offsets)
        from pcache.prompt.renderers.harmony import token_starts

        return token_starts(self.encoding.decode_tokens_bytes(ids), False)


def running_starts(byte_lengths: list[int], ids: list[int]) -> tuple[list[int], int]:
    """Each token's first byte from the byte lengths of the tokens before it, and the end of
    the last one (in an ASCII piece, bytes are characters)."""
    starts = list(accumulate(map(byte_lengths.__getitem__, ids), initial=0))
    end = starts.pop()
    return starts, end


def tiktoken_byte_lengths(encoding: Any) -> list[int]:
    """The byte length of every id of a tiktoken encoding (0 for unused ids)."""
    lengths = [0] * (encoding.max_token_value + 1)
    for token, rank in encoding._mergeable_ranks.items():
        lengths[rank] = len(token)
    for token, rank in encoding._special_tokens.items():
        lengths[rank] = len(token.encode("utf-8"))
    return lengths


def monotonic_starts(offsets: list[tuple[int, int]]) -> list[int]:
    """Token starts from `tokenizers` offsets; byte pieces of one character share its start."""
    starts: list[int] = []
    previous = 0
    for start, _ in offsets:
        previous = max(previous, start)
        starts.append(previous)
    return starts


def longest_match_pattern(words: list[str]) -> str:
    """A regex finding the words leftmost-longest (as the tokenizer's Aho-Corasick matcher does),
    written as a trie so a match costs its length, not the number of words."""
    trie: dict[str, dict] = {}
    for word in words:
        node = trie
        for character in word:
            node = node.setdefault(character, {})
        node[""] = {}

    def pattern(node: dict[str, dict]) -> str:
        branches = [re.escape(c) + pattern(child) for c, child in sorted(node.items()) if c]
        if not branches:
            return ""
        inner = branches[0] if len(branches) == 1 else "(?:" + "|".join(branches) + ")"
        if "" in node:  # a word ends here: a longer one is tried first (greedy)
            return "(?:" + inner + ")?"
        return inner

    return pattern(trie)


_ASCII_KEEPING_NORMALIZERS = {"NFC", "NFD", "NFKC", "NFKD", "Sequence"}
_OFFSET_KEEPING_PROCESSORS = {"TemplateProcessing", "Sequence", "ByteLevel"}


def _offsets_are_byte_lengths(tokenizer: Any) -> bool:
    """Whether each token of ASCII text starts where the byte lengths of the ones before it
    end: a byte-level BPE whose normalizer keeps ASCII text and whose post-processor keeps
    offsets (no `trim_offsets`). `piece_starts` still checks that the lengths add up."""
    if type(tokenizer.model).__name__ != "BPE":
        return False
    pre_tokenizers = _components(tokenizer.pre_tokenizer)
    normalizers = _components(tokenizer.normalizer)
    processors = _components(tokenizer.post_processor)
    return (
        any(part["type"] == "ByteLevel" for part in pre_tokenizers)
        and all(part["type"] in _ASCII_KEEPING_NORMALIZERS for part in normalizers)
        and all(part["type"] in _OFFSET_KEEPING_PROCESSORS for part in processors)
        and not any(part.get("trim_offsets") for part in processors)
    )


def _components(component: Any) -> list[dict[str, Any]]:
    """The serialized states of a tokenizer component and of everything nested in it."""
    found: list[dict[str, Any]] = []

    def walk(value: Any) -> None:
        if isinstance(value, dict):
            if isinstance(value.get("type"), str):
                found.append(value)
            for item in value.values():
                walk(item)
        elif isinstance(value, list):
            for item in value:
                walk(item)

    if component is not None:
        walk(json.loads(component.__getstate__()))
    return found


def _byte_lengths(tokenizer: Any) -> list[int]:
    """The length of every token id's vocabulary string (bytes, for a byte-level BPE)."""
    size = tokenizer.get_vocab_size(with_added_tokens=True)
    return [len(tokenizer.id_to_token(token) or "") for token in range(size)]


def _pre_tokenizer_sees_position(state: dict[str, Any]) -> bool:
    """Whether a pre-tokenizer treats the first piece of a text differently from the others."""
    if state.get("type") == "Sequence":
        return any(_pre_tokenizer_sees_position(child) for child in state["pretokenizers"])
    return state.get("type") == "Metaspace" and state.get("prepend_scheme") == "first"
