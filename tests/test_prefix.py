"""`common_prefix_length` and `common_run_length` against the obvious loop."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from pcache.text.prefix import common_prefix_length, common_run_length


def naive(a, b) -> int:
    count = 0
    for left, right in zip(a, b, strict=False):
        if left != right:
            break
        count += 1
    return count


shared = st.lists(st.integers(0, 3), max_size=1400)
tails = st.lists(st.integers(0, 3), max_size=40)


@given(shared, tails, tails, st.integers(0, 800))
def test_equals_the_naive_loop(prefix, tail_a, tail_b, start):
    a, b = prefix + tail_a, prefix + tail_b
    expected = naive(a, b)
    assert common_prefix_length(a, b) == expected
    assert common_prefix_length(tuple(a), tuple(b)) == expected
    assert common_prefix_length(a, tuple(b)) == expected  # slices of two types never agree
    text_a, text_b = "".join(map(str, a)), "".join(map(str, b))
    assert common_prefix_length(text_a, text_b) == naive(text_a, text_b)
    known = min(start, expected)  # the caller vouches for the first `known` items
    assert common_prefix_length(a, b, known) == expected


@given(tails, shared, tails, tails, st.integers(0, 5))
def test_a_run_at_two_offsets_equals_the_naive_loop(lead, run, tail_a, tail_b, offset):
    a = lead + run + tail_a
    b = lead[:offset] + run + tail_b
    at_a, at_b = len(lead), min(offset, len(lead))
    assert common_run_length(a, at_a, b, at_b) == naive(a[at_a:], b[at_b:])
    assert common_run_length(tuple(a), at_a, b, at_b) == naive(a[at_a:], b[at_b:])
