"""Building blocks shared by the decoder families: RMSNorm, rotary embeddings, SwiGLU."""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import nn
from torch.nn import functional as F

from pcache.engine.models import onednn_linear


def rms_normalize(x: torch.Tensor, eps: float) -> torch.Tensor:
    """x / rms(x) over the last dimension, in fp32: one reduction pass and one scaling pass."""
    x = x.float()
    sum_of_squares = torch.linalg.vector_norm(x, dim=-1, keepdim=True).square_()
    return x * sum_of_squares.div_(x.shape[-1]).add_(eps).rsqrt_()


class RMSNorm(nn.Module):
    """Root-mean-square norm computed in fp32, scaled by a learned weight."""

    def __init__(self, size: int, eps: float) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.empty(size))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # the normalized tensor is this call's own: scale it in place
        return rms_normalize(x, self.eps).to(x.dtype).mul_(self.weight)


def head_rms_norm(x: torch.Tensor, num_first: int, first: RMSNorm, second: RMSNorm):
    """Per-head RMSNorm of x [tokens, heads, head_dim] in one pass over all heads: the first
    `num_first` heads take `first`'s weight, the others `second`'s (Qwen3's q and k norms)."""
    assert first.eps == second.eps and 0 < num_first < x.shape[1]
    normed = rms_normalize(x, first.eps).to(x.dtype)
    normed[:, :num_first].mul_(first.weight)
    normed[:, num_first:].mul_(second.weight)
    return normed


def inverse_frequencies(head_dim: int, theta: float, scaling: dict[str, Any]) -> torch.Tensor:
    """Rotary inverse frequencies for rope types default, linear and llama3."""
    exponents = torch.arange(0, head_dim, 2, dtype=torch.int64).float() / head_dim
    inv_freq = 1.0 / (theta**exponents)
    rope_type = scaling.get("rope_type", "default")
    if rope_type == "linear":
        return inv_freq / scaling["factor"]
    if rope_type != "llama3":
        return inv_freq
    factor = scaling["factor"]
    low, high = scaling["low_freq_factor"], scaling["high_freq_factor"]
    old_context = scaling["original_max_position_embeddings"]
    low_wavelen, high_wavelen = old_context / low, old_context / high
    wavelen = 2 * math.pi / inv_freq
    scaled = torch.where(wavelen > low_wavelen, inv_freq / factor, inv_freq)
    smooth = (old_context / wavelen - low) / (high - low)
    smoothed = (1 - smooth) * scaled / factor + smooth * scaled
    is_medium = ~(wavelen < high_wavelen) * ~(wavelen > low_wavelen)
    return torch.where(is_medium, smoothed, scaled)


class RotaryEmbedding(nn.Module):
    """cos/sin tables [max_positions, head_dim] for the two-halves (NeoX) rotary layout.

    Element i pairs with element i + head_dim / 2 at frequency i. `sin` holds -sin on the
    first half, so a rotation is `x * cos + swap_halves(x) * sin` (see `apply_rotary`).
    """

    def __init__(self, head_dim: int, max_positions: int, theta: float, scaling: dict) -> None:
        super().__init__()
        inv_freq = inverse_frequencies(head_dim, theta, scaling)
        positions = torch.arange(max_positions, dtype=torch.int64).float()
        freqs = positions[:, None] * inv_freq[None, :]
        cos, sin = freqs.cos(), freqs.sin()
        self.register_buffer("cos", torch.cat((cos, cos), dim=-1), persistent=False)
        self.register_buffer("sin", torch.cat((-sin, sin), dim=-1), persistent=False)

    def forward(self, positions: torch.Tensor, dtype: torch.dtype):
        # index_select: the same rows as cos[positions], without advanced indexing's cost
        cos = torch.index_select(self.cos, 0, positions)
        return cos.to(dtype), torch.index_select(self.sin, 0, positions).to(dtype)


def apply_rotary(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate x [tokens, heads, head_dim] by its tokens' angles (tables [tokens, head_dim]).

    first' = first * cos - second * sin, second' = second * cos + first * sin: the halves
    swapped into a new tensor, then scaled and accumulated in place (three passes in all).
    """
    num_tokens, num_heads, head_dim = x.shape
    assert cos.shape == sin.shape == (num_tokens, head_dim)
    swapped = x.view(num_tokens, num_heads, 2, head_dim // 2).flip(2)
    rotated = swapped.view(num_tokens, num_heads, head_dim).mul_(sin[:, None, :])
    return rotated.addcmul_(x, cos[:, None, :])


class GatedMLP(nn.Module):
    """SwiGLU MLP with gate and up projections packed into one matrix."""

    def __init__(self, hidden_size: int, intermediate_size: int, bias: bool) -> None:
        super().__init__()
        self.gate_up_proj = onednn_linear.Linear(hidden_size, 2 * intermediate_size, bias=bias)
        self.down_proj = onednn_linear.Linear(intermediate_size, hidden_size, bias=bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        gate, up = self.gate_up_proj(x).chunk(2, dim=-1)
        return self.down_proj(F.silu(gate).mul_(up))
