"""How long two sequences (token ids, block hashes, text) agree from the start."""

from __future__ import annotations

from collections.abc import Sequence

_STEP = 256


def common_prefix_length(a: Sequence, b: Sequence, start: int = 0) -> int:
    """Length of the longest common prefix of `a` and `b`, which agree on their first `start`.

    Whole chunks are compared as slices (at C speed), then the last chunk item by item.
    """
    limit = min(len(a), len(b))
    index = min(start, limit)
    while index + _STEP <= limit and a[index : index + _STEP] == b[index : index + _STEP]:
        index += _STEP
    while index < limit and a[index] == b[index]:
        index += 1
    return index
