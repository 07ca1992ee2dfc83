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
from typing import Any

Segment = tuple[int, str, int | None]
"""(character offset, text, added token id or None for a piece the tokenizer encodes)."""


class HFPieces:
    """Cuts text at a tokenizer's non-normalized added tokens; encodes the pieces between."""

    def __init__(self, tokenizer: Any, matched: list[str], cut_ids: dict[str, int]):
        self.tokenizer = tokenizer
        self.cut_ids = cut_ids
        self.splitter = re.compile(longest_match_pattern(matched)) if matched else None

    @classmethod
    def of(cls, tokenizer: Any) -> HFPieces | None:
        """The piece encoder of `tokenizer`, or None when pieces cannot be encoded apart."""
        if tokenizer.pre_tokenizer is not None and _pre_tokenizer_sees_position(
            json.loads(tokenizer.pre_tokenizer.__getstate__())
        ):
            return None
        text_specials = tokenizer.encode_special_tokens
        matched: list[str] = []
        cut_ids: dict[str, int] = {}
        for token in tokenizer.get_added_tokens_decoder().values():
            if token.normalized or not token.content:
                continue
            if token.lstrip or token.rstrip or token.single_word:
                return None
            matched.append(token.content)
            if not (token.special and text_specials):
                cut_ids[token.content] = tokenizer.token_to_id(token.content)
        return cls(tokenizer, matched, cut_ids)

    def segments(self, text: str) -> list[Segment]:
        """Pieces and cut tokens. A special token read as text (`encode_special_tokens`) is
        still matched, as the tokenizer matches it, but stays inside its piece."""
        result: list[Segment] = []
        position = 0
        if self.splitter is not None:
            cut_ids = self.cut_ids
            for match in self.splitter.finditer(text):
                token = match.group()
                if token not in cut_ids:
                    continue
                start = match.start()
                if start > position:
                    result.append((position, text[position:start], None))
                result.append((start, token, cut_ids[token]))
                position = match.end()
        if position < len(text):
            result.append((position, text[position:], None))
        return result

    def encode_pieces(self, pieces: list[str]) -> list[list[int]]:
        """Ids of each piece, in one batch (threads; no offsets, which cost time)."""
        encodings = self.tokenizer.encode_batch_fast(pieces, add_special_tokens=False)
        return [encoding.ids for encoding in encodings]

    def piece_starts(self, piece: str, ids: list[int]) -> list[int]:
        """Each token's first character in `piece` (never before the previous token's)."""
        encoding = self.tokenizer.encode(piece, add_special_tokens=False)
        assert encoding.ids == ids
        return monotonic_starts(encoding.offsets)


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


def _pre_tokenizer_sees_position(state: dict[str, Any]) -> bool:
    """Whether a pre-tokenizer treats the first piece of a text differently from the others."""
    if state.get("type") == "Sequence":
        return any(_pre_tokenizer_sees_position(child) for child in state["pretokenizers"])
    return state.get("type") == "Metaspace" and state.get("prepend_scheme") == "first"
