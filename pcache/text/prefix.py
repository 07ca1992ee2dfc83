"""How long two sequences (token ids, block hashes, text) agree from the start.

Slices are compared at C speed: runs of growing length while they agree, then halves of the
run that does not, down to a few items compared one by one. Sequences of two types (a list
and a tuple, whose slices never compare equal) are compared item by item.
"""

from __future__ import annotations

from collections.abc import Sequence

_STEP = 256
"""The first run compared as slices."""
_LINEAR = 16
"""Items left to compare one by one when a run is halved no further."""


def common_prefix_length(a: Sequence, b: Sequence, start: int = 0) -> int:
    """Length of the longest common prefix of `a` and `b`, which agree on their first `start`."""
    limit = min(len(a), len(b))
    known = min(start, limit)
    return known + _agreeing(a, known, b, known, limit - known)


def common_run_length(a: Sequence, at_a: int, b: Sequence, at_b: int) -> int:
    """How long `a[at_a:]` and `b[at_b:]` agree from their start."""
    limit = min(len(a) - at_a, len(b) - at_b)
    return _agreeing(a, at_a, b, at_b, limit) if limit > 0 else 0


def _agreeing(a: Sequence, at_a: int, b: Sequence, at_b: int, limit: int) -> int:
    """How many items `a[at_a:]` and `b[at_b:]` share from their start, `limit` at most."""
    shared = 0
    if type(a) is type(b):
        step = _STEP
        while shared + step <= limit and (
            a[at_a + shared : at_a + shared + step] == b[at_b + shared : at_b + shared + step]
        ):
            shared += step
            step *= 2
        high = min(shared + step, limit)  # the first difference is at `high` at most
        while high - shared > _LINEAR:
            middle = (shared + high) // 2
            if a[at_a + shared : at_a + middle] == b[at_b + shared : at_b + middle]:
                shared = middle
            else:
                high = middle
    while shared < limit and a[at_a + shared] == b[at_b + shared]:
        shared += 1
    return shared
