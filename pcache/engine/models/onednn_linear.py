"""Linear layers over weights reordered once into oneDNN's own layout (fp32 on the CPU).

oneDNN's inner-product kernel reads a weight it has reordered itself (`_reorder_linear_weight`)
faster than MKL reads a plain one. Measured on a 2-core AMD EPYC (AVX-512), one thread, fp32
(`bench/bench_lm_head.py`, `bench/bench_decode.py`): a 128,256 x 256 output projection of 4
rows takes 7-10 ms reordered, 10-14 ms as MKL's weight @ hidden^T and 25-29 ms as
`nn.Linear`'s hidden @ weight^T; the MLP projections of a 256-token prefill run at 95-108
GFLOP/s reordered against 77-96. vLLM's CPU build reorders its linear layers the same way
(its `onednn_mm`).

The products are the same fp32 multiply-adds summed in another order, so the outputs equal
`nn.Linear`'s up to float rounding. The reordered copy is made by `prepare` (once the weights
are loaded) or on first use, and again whenever the weight changes (another tensor, or an
in-place write, seen by its version counter); it costs one more copy of the weight in memory
(`reordered_bytes`). Elsewhere (another device or dtype, a torch without these ops, or
oneDNN refusing once) the layer is `nn.Linear`.
"""

from __future__ import annotations

import functools

import torch
from torch import nn

BATCH_HINT = 32
"""The row count oneDNN plans the reordered layout for; measured as good from 1 to 32 rows
and for prefills of hundreds."""


def reorder_applies(weight: torch.Tensor) -> bool:
    """True where a reordered copy of `weight` is used: fp32 on the CPU, with oneDNN's ops
    (built into this torch and not switched off by `torch.backends.mkldnn.enabled`)."""
    return (
        weight.device.type == "cpu"
        and weight.dtype == torch.float32
        and weight.dim() == 2
        and torch.backends.mkldnn.enabled
        and _has_onednn_ops()
    )


@functools.cache
def _has_onednn_ops() -> bool:
    return (
        torch.backends.mkldnn.is_available()
        and hasattr(torch.ops.mkldnn, "_linear_pointwise")
        and hasattr(torch.ops.mkldnn, "_reorder_linear_weight")
    )


def reordered_bytes(num_weights: int, element: int) -> int:
    """The memory reordered copies of `num_weights` weights take (one more copy of each)."""
    return num_weights * element


class ReorderedWeight:
    """The reordered copy of one weight and the product with it; `linear` gives None where it
    does not apply (the caller then computes the plain product)."""

    def __init__(self) -> None:
        self._key: tuple[int, int, tuple[int, ...]] | None = None
        self._reordered: torch.Tensor | None = None
        self._refused = False

    def prepare(self, weight: torch.Tensor) -> bool:
        """Reorder `weight` now (not in the first step that uses it); False where it does not
        apply."""
        if self._refused or not reorder_applies(weight):
            return False
        try:
            self._current(weight)
        except RuntimeError:
            self._refuse()
            return False
        return True

    def linear(
        self, hidden: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None
    ) -> torch.Tensor | None:
        """hidden @ weight^T (+ bias) through the reordered copy, or None."""
        if self._refused or hidden.dim() != 2 or not reorder_applies(weight):
            return None
        if hidden.dtype != weight.dtype or hidden.device != weight.device:
            return None
        if bias is not None and (bias.dtype != weight.dtype or bias.device != weight.device):
            return None
        try:
            return torch.ops.mkldnn._linear_pointwise(
                hidden.contiguous(), self._current(weight), bias, "none", [], ""
            )
        except RuntimeError:  # an oneDNN build that cannot: the plain product from now on
            self._refuse()
            return None

    def _refuse(self) -> None:
        self._refused = True
        self._key = self._reordered = None

    def _current(self, weight: torch.Tensor) -> torch.Tensor:
        key = (weight.data_ptr(), _version(weight), tuple(weight.shape))
        if key != self._key or self._reordered is None:
            with torch.inference_mode():
                self._reordered = torch.ops.mkldnn._reorder_linear_weight(
                    weight.detach(), BATCH_HINT
                )
            self._key = key
        return self._reordered


class Linear(nn.Linear):
    """`nn.Linear` (same parameters, same checkpoint names) computed through a reordered copy
    of its weight where that applies."""

    def __init__(self, in_features: int, out_features: int, bias: bool = True) -> None:
        super().__init__(in_features, out_features, bias=bias)
        self.reordered = ReorderedWeight()

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        output = self.reordered.linear(hidden, self.weight, self.bias)
        return super().forward(hidden) if output is None else output

    def prepare(self) -> bool:
        return self.reordered.prepare(self.weight)


def _version(tensor: torch.Tensor) -> int:
    """The tensor's in-place write counter (an inference tensor has none: it is written only
    in inference mode, where the engine never writes weights)."""
    try:
        return tensor._version
    except RuntimeError:
        return -1
