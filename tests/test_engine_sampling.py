"""The two-level inverse transform of `draw`: the index the whole float64 cumulative sum gives,
but where the number lies within float32 block sums' rounding of a boundary."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

torch = pytest.importorskip("torch")

from pcache.engine.sampling import (  # noqa: E402
    DRAW_BLOCK,
    Sampler,
    cumulative_index,
    draw,
    greedy_tokens,
)


def whole_cumulative_index(probabilities, uniform):
    cumulative = probabilities.cumsum(dim=-1, dtype=torch.float64)
    index = torch.searchsorted(cumulative, uniform * cumulative[:, -1:], right=True)
    return index.clamp_(max=probabilities.shape[1] - 1), cumulative


@settings(max_examples=80, deadline=None)
@given(
    vocab=st.integers(4 * DRAW_BLOCK + 1, 12 * DRAW_BLOCK + 7),
    rows=st.integers(1, 4),
    seed=st.integers(0, 2**32 - 1),
    shape=st.sampled_from(["softmax", "sparse", "peaked", "zero tail"]),
)
def test_two_levels_find_the_whole_cumulative_sums_index(vocab, rows, seed, shape):
    generator = torch.Generator().manual_seed(seed)
    logits = 3 * torch.randn(rows, vocab, generator=generator)
    if shape == "sparse":  # most tokens impossible, whole blocks of zeros
        logits[torch.rand(rows, vocab, generator=generator) < 0.97] = -torch.inf
        logits[:, 0] = 0.0
    elif shape == "peaked":
        logits[:, vocab // 2] = 60.0
    elif shape == "zero tail":  # the last (partial) block and more have no probability
        logits[:, vocab - DRAW_BLOCK - 3 :] = -torch.inf
    probabilities = torch.softmax(logits, dim=-1)
    uniform = torch.rand((rows, 1), generator=generator, dtype=torch.float64)
    uniform[0, 0] = float(torch.rand(1, generator=generator)) ** 40  # near the first token
    two_levels = cumulative_index(probabilities, uniform)
    whole, cumulative = whole_cumulative_index(probabilities, uniform)
    assert two_levels.shape == (rows, 1)
    for row in range(rows):
        got, expected = int(two_levels[row]), int(whole[row])
        if got != expected:  # only where the number sits on a boundary, up to rounding
            target = float(uniform[row] * cumulative[row, -1])
            boundary = float(cumulative[row, min(got, expected)])
            assert abs(boundary - target) <= 2**-20 * float(cumulative[row, -1])
        assert float(probabilities[row, got]) > 0 or float(probabilities[row].max()) == 0


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), vocab=st.integers(4 * DRAW_BLOCK + 1, 9000))
def test_a_wide_draw_never_picks_a_token_of_zero_probability(seed, vocab):
    generator = torch.Generator().manual_seed(seed)
    weights = torch.zeros(3, vocab)
    weights[0, vocab - 1] = 1.0  # all of it on the last column
    weights[1, :: DRAW_BLOCK + 1] = torch.rand(weights[1, :: DRAW_BLOCK + 1].shape)
    weights[2, 1] = 1e-30
    weights[2, vocab // 3] = 1.0
    probabilities = weights / weights.sum(dim=-1, keepdim=True)
    drawn = draw(probabilities, generator)
    assert drawn.shape == (3,) and int(drawn[0]) == vocab - 1
    assert bool((probabilities.gather(1, drawn[:, None]) > 0).all())


def test_wide_draws_follow_the_probabilities():
    vocab = 5 * DRAW_BLOCK + 11
    row = torch.zeros(vocab)
    chosen = {3: 0.1, DRAW_BLOCK: 0.2, 2 * DRAW_BLOCK + 5: 0.3, vocab - 1: 0.4}
    for column, p in chosen.items():
        row[column] = p
    drawn = draw(row.repeat(4000, 1), torch.Generator().manual_seed(0))
    counts = torch.bincount(drawn, minlength=vocab)
    assert int(counts.sum()) == 4000 and set(torch.nonzero(counts).flatten().tolist()) <= set(
        chosen
    )
    for column, p in chosen.items():  # within 5 standard deviations of its expectation
        assert abs(int(counts[column]) - 4000 * p) <= 5 * (4000 * p * (1 - p)) ** 0.5


def test_sampled_logits_follow_their_softmax():
    """The sampler draws from exp(logit - max) unnormalized: the frequencies are the softmax's."""
    vocab = 5 * DRAW_BLOCK + 11
    chosen = {7: 0.1, DRAW_BLOCK + 1: 0.2, 3 * DRAW_BLOCK: 0.3, vocab - 2: 0.4}
    logits = torch.full((4000, vocab), -torch.inf)
    for column, p in chosen.items():
        logits[:, column] = math.log(p) + 40.0  # far from 0: the weights are not probabilities
    drawn = torch.tensor(Sampler(0, torch.device("cpu"))(logits, [1.0] * 4000))
    counts = torch.bincount(drawn, minlength=vocab)
    assert set(torch.nonzero(counts).flatten().tolist()) <= set(chosen)
    for column, p in chosen.items():  # within 5 standard deviations of its expectation
        assert abs(int(counts[column]) - 4000 * p) <= 5 * (4000 * p * (1 - p)) ** 0.5


LOGIT = st.sampled_from([0.0, 1.0, -1.0, 2.5, math.inf, -math.inf, math.nan])


@settings(max_examples=80, deadline=None)
@given(
    rows=st.lists(st.lists(LOGIT, min_size=6, max_size=6), min_size=1, max_size=5),
    dtype=st.sampled_from(["float32", "float64", "bfloat16"]),
    transposed=st.booleans(),
)
def test_greedy_tokens_are_torchs_argmax(rows, dtype, transposed):
    """Ties to the first, a NaN as the largest, any layout and dtype: argmax's answer."""
    logits = torch.tensor(rows, dtype=getattr(torch, dtype))
    if transposed:
        logits = logits.t().contiguous().t()
    assert greedy_tokens(logits).tolist() == logits.argmax(dim=-1).tolist()
