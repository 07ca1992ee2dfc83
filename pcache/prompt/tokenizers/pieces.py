"""A text cut into pieces that encode apart, and what cuts and encodes them.

`Parts` is how every piece-aware encoder (`hf_pieces`, `segment_cache`) hands a cut text
around; `PieceEncoder` is what a renderer offers (`PieceRenderer.piece_encoder`) so that
`SegmentCachedRenderer` can encode each distinct piece once.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

Parts = list[str]
"""A text cut at its special tokens: ordinary pieces at even indices ("" between two adjacent
specials), the special tokens' text at odd ones, as `re.split` with one group returns them."""


class PieceEncoder(Protocol):
    """How one tokenizer cuts text, and how it encodes the pieces between the cuts."""

    special_ids: dict[str, int]
    """The id of every special token `parts` cuts at."""

    def parts(self, text: str) -> Parts | None:
        """The text cut where the tokenizer cuts it; None: this text cannot be cut."""
        ...

    def encode_pieces(self, pieces: list[str]) -> Sequence[Sequence[int]]:
        """The ids of each piece (lists or 4-byte arrays)."""
        ...

    def piece_starts(self, piece: str, ids: list[int]) -> list[int]:
        """Each token's first character within `piece`."""
        ...
