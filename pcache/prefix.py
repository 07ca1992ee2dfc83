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


def common_run_length(a: Sequence, at_a: int, b: Sequence, at_b: int) -> int:
    """How long `a[at_a:]` and `b[at_b:]` agree from their start (slices compared by chunks)."""
    limit = min(len(a) - at_a, len(b) - at_b)
    shared = 0
    while shared + _STEP <= limit and (
        a[at_a + shared : at_a + shared + _STEP] == b[at_b + shared : at_b + shared + _STEP]
    ):
        shared += _STEP
    while shared < limit and a[at_a + shared] == b[at_b + shared]:
        shared += 1
    return shared
