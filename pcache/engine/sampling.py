"""Next-token choice: greedy by default, temperature (and top-k) sampling with a seeded generator.

Whatever the parameters and the logits, every row gets a token id in [0, vocab): a temperature
below `MIN_TEMPERATURE` (or one that is not a number) is greedy, the scaled logits never
produce inf or NaN probabilities (`safe_probabilities`), and a top-k at or above the vocabulary
size keeps every token.
"""

from __future__ import annotations

import math

import torch

from pcache.defaults import GREEDY_BELOW as MIN_TEMPERATURE


def is_sampled(temperature: float) -> bool:
    """True when `temperature` asks for sampling (NaN, zero and tiny ones are greedy)."""
    return temperature >= MIN_TEMPERATURE and not math.isinf(temperature)


def safe_probabilities(scaled: torch.Tensor) -> torch.Tensor:
    """Softmax over the last dimension that never yields NaN or inf, rows summing to 1.

    NaN logits count as -inf. A row with +inf logits is uniform over them (the limit of the
    softmax); a row with no finite and no +inf logit is uniform over the whole row.
    """
    scaled = scaled.nan_to_num(nan=-math.inf, posinf=math.inf, neginf=-math.inf)
    top = scaled.amax(dim=-1, keepdim=True)
    shift = torch.where(torch.isfinite(top), top, torch.zeros_like(top))
    weights = torch.exp(scaled - shift)
    infinite = scaled == math.inf
    weights = torch.where((top == math.inf), infinite.to(weights.dtype), weights)
    total = weights.sum(dim=-1, keepdim=True)
    empty = ~(total > 0)  # every logit -inf (or NaN): nothing to prefer
    weights = torch.where(empty, torch.ones_like(weights), weights)
    return weights / torch.where(empty, weights.shape[-1], total)


def keep_top_k(scaled: torch.Tensor, top_ks: list[int]) -> torch.Tensor:
    """Logits outside each row's k largest become -inf; k <= 0 or k >= vocab keeps all."""
    vocab = scaled.shape[-1]
    ks = [k if 0 < k < vocab else vocab for k in top_ks]
    if all(k == vocab for k in ks):
        return scaled
    largest = max(ks)
    values = scaled.nan_to_num(nan=-math.inf).topk(largest, dim=-1).values
    index = torch.tensor([k - 1 for k in ks], device=scaled.device)[:, None]
    threshold = values.gather(-1, index)
    return scaled.masked_fill(scaled < threshold, -math.inf)


def relative_weights(scaled: torch.Tensor) -> torch.Tensor:
    """Weights proportional to `safe_probabilities(scaled)`, not normalized: exp(logit - row
    max) when every row's largest logit is finite (no NaN, no +inf, not all -inf: the case of
    every real model's logits), one pass fewer than a softmax; else the safe probabilities.
    `draw` scales its number by each row's total, so it needs no normalized rows."""
    top = scaled.amax(dim=-1, keepdim=True)
    if bool(torch.isfinite(top).all()):
        return (scaled - top).exp_()
    return safe_probabilities(scaled)


DRAW_BLOCK = 512
"""Columns per block of `draw`'s two-level cumulative sum."""


def draw(probabilities: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    """One token per row of `probabilities` (non-negative weights, each row's total positive;
    they need not sum to 1), by inverse transform: one uniform number per row, times the
    row's total, against the row's cumulative sum, so a draw costs a pass over the vocabulary
    where `torch.multinomial`'s exponential race costs one random number per vocabulary entry.
    The cumulative sum is taken in two levels (`cumulative_index`): the sums of blocks of
    `DRAW_BLOCK` columns, then the one block the number falls in. A token of zero probability
    is never drawn: where rounding at a block's or the row's end lands on one, that row is
    drawn by `torch.multinomial`."""
    rows = probabilities.shape[0]
    uniform = torch.rand(
        (rows, 1), generator=generator, dtype=torch.float64, device=probabilities.device
    )
    index = cumulative_index(probabilities, uniform)
    impossible = probabilities.gather(1, index) <= 0
    if bool(impossible.any()):
        redrawn = torch.multinomial(probabilities, 1, generator=generator)
        index = torch.where(impossible, redrawn, index)
    return index.squeeze(1)


def cumulative_index(probabilities: torch.Tensor, uniform: torch.Tensor) -> torch.Tensor:
    """[rows, 1]: per row the first column whose cumulative sum exceeds `uniform` [rows, 1]
    times the row's total; the last column where none does (rounding).

    Two levels: the sums of blocks of `DRAW_BLOCK` columns and their float64 cumulative sum
    find the block, then that block's own float64 cumulative sum, from the block's start, the
    column; one read of the row in all, instead of writing a float64 cumulative sum of the
    whole vocabulary and searching it. The block sums are taken in the weights' own float32
    (torch's cascade sum: within 2^-20 of each block's exact sum, below the rounding of the
    weights themselves), since converting the row to float64 costs more than the rest of
    the draw (a 128k vocabulary, 4 rows, one thread: 363 us, against 40 us in float32). The
    number then lands on the other side of a boundary only within that much of one."""
    rows, vocab = probabilities.shape
    width = DRAW_BLOCK
    if vocab <= 4 * width or not probabilities.is_contiguous():
        cumulative = probabilities.cumsum(dim=-1, dtype=torch.float64)
        index = torch.searchsorted(cumulative, uniform * cumulative[:, -1:], right=True)
        return index.clamp_(max=vocab - 1)
    whole = vocab - vocab % width
    sums = probabilities[:, :whole].view(rows, whole // width, width).sum(-1)
    if whole < vocab:
        tail = probabilities[:, whole:].sum(-1, keepdim=True)
        sums = torch.cat((sums, tail), dim=1)
    num_blocks = sums.shape[1]
    ends = sums.cumsum(dim=-1, dtype=torch.float64)
    target = uniform * ends[:, -1:]
    block = torch.searchsorted(ends, target, right=True).clamp_(max=num_blocks - 1)
    start = torch.where(block > 0, ends.gather(1, (block - 1).clamp_(min=0)), 0.0)
    offsets = torch.arange(width, device=probabilities.device)
    columns = (block * width + offsets).clamp_(max=vocab - 1)  # [rows, width]
    inside = probabilities.gather(1, columns).cumsum(dim=-1, dtype=torch.float64) + start
    past_end = block * width + offsets >= vocab  # the last block's columns beyond the row
    inside = inside.masked_fill_(past_end, math.inf)
    column = torch.searchsorted(inside, target, right=True).clamp_(max=width - 1)
    return (block * width + column).clamp_(max=vocab - 1)


def greedy_tokens(logits: torch.Tensor) -> torch.Tensor:
    """Each row's first largest logit (a NaN counts as the largest), as `argmax` gives it.

    float32 and float64 CPU logits are read by numpy's argmax, which keeps to one pass: torch's
    CPU argmax over a large vocabulary takes about 0.16 ms a row on one thread (a 128k
    vocabulary), numpy's 0.01 ms."""
    if logits.device.type == "cpu" and logits.dtype in (torch.float32, torch.float64):
        return torch.from_numpy(logits.detach().numpy().argmax(axis=-1))
    return logits.argmax(dim=-1)


class Sampler:
    """Picks one token per row of logits; rows with a (near) zero temperature are greedy."""

    def __init__(self, seed: int, device: torch.device) -> None:
        self.generator = torch.Generator(device=device).manual_seed(seed)

    def __call__(
        self, logits: torch.Tensor, temperatures: list[float], top_ks: list[int] | None = None
    ) -> list[int]:
        sampled_rows = [is_sampled(temperature) for temperature in temperatures]
        if not any(sampled_rows):
            return greedy_tokens(logits).tolist()
        scale = [t if row else 1.0 for t, row in zip(temperatures, sampled_rows, strict=True)]
        if all(t == 1.0 for t in scale) and logits.dtype == torch.float32:
            # dividing by 1 changes nothing: only make the rows row-major (a transposed
            # product's are not), so the row reductions below read memory in order
            scaled = logits.contiguous()
        else:
            scale_tensor = torch.tensor(scale, dtype=torch.float32, device=logits.device)
            scaled = torch.empty(logits.shape, dtype=torch.float32, device=logits.device)
            torch.div(logits, scale_tensor[:, None], out=scaled)
        if top_ks is not None:
            scaled = keep_top_k(scaled, top_ks)
        sampled = draw(relative_weights(scaled), self.generator)
        if all(sampled_rows):
            return sampled.tolist()
        is_greedy = torch.tensor([not row for row in sampled_rows], device=logits.device)
        return torch.where(is_greedy, greedy_tokens(logits), sampled).tolist()
