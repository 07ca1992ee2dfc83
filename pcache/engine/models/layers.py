"""Building blocks shared by the decoder families: RMSNorm, rotary embeddings, SwiGLU."""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import nn
from torch.nn import functional as F


class RMSNorm(nn.Module):
    """Root-mean-square norm computed in fp32, scaled by a learned weight."""

    def __init__(self, size: int, eps: float) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.empty(size))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        dtype = x.dtype
        x = x.float()
        normed = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)
        # `normed` is this call's own tensor (or its fresh cast): scale it in place
        return normed.to(dtype).mul_(self.weight)


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
    """cos/sin tables [max_positions, head_dim / 2] for the two-halves (NeoX) rotary layout.

    The rotation pairs element i with element i + head_dim / 2; both share frequency i, so
    one half-width table serves both halves.
    """

    def __init__(self, head_dim: int, max_positions: int, theta: float, scaling: dict) -> None:
        super().__init__()
        inv_freq = inverse_frequencies(head_dim, theta, scaling)
        positions = torch.arange(max_positions, dtype=torch.int64).float()
        freqs = positions[:, None] * inv_freq[None, :]
        self.register_buffer("cos", freqs.cos(), persistent=False)
        self.register_buffer("sin", freqs.sin(), persistent=False)

    def forward(self, positions: torch.Tensor, dtype: torch.dtype):
        return self.cos[positions].to(dtype), self.sin[positions].to(dtype)


def apply_rotary(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate x [tokens, heads, head_dim] by its tokens' angles (cos/sin [tokens, head_dim / 2]).

    first' = first * cos - second * sin and second' = second * cos + first * sin, written
    straight into the two halves of one new tensor (no rotated copy, no concatenation).
    """
    assert cos.shape[-1] * 2 == x.shape[-1]
    first, second = x.chunk(2, dim=-1)
    cos, sin = cos[:, None, :], sin[:, None, :]
    out = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    out_first, out_second = out.chunk(2, dim=-1)
    torch.mul(first, cos, out=out_first).addcmul_(second, sin, value=-1)
    torch.mul(second, cos, out=out_second).addcmul_(first, sin)
    return out


class GatedMLP(nn.Module):
    """SwiGLU MLP with gate and up projections packed into one matrix."""

    def __init__(self, hidden_size: int, intermediate_size: int, bias: bool) -> None:
        super().__init__()
        self.gate_up_proj = nn.Linear(hidden_size, 2 * intermediate_size, bias=bias)
        self.down_proj = nn.Linear(intermediate_size, hidden_size, bias=bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        gate, up = self.gate_up_proj(x).chunk(2, dim=-1)
        return self.down_proj(F.silu(gate).mul_(up))
