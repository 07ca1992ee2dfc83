"""A linear layer's weight reordered once into oneDNN's own layout, for the CPU's fp32 products.

oneDNN's inner-product kernel reads a weight it has reordered itself (`_reorder_linear_weight`)
faster than MKL reads a plain one, most of all for the few rows of a decode step over a large
vocabulary. Measured on a 2-core AMD EPYC (AVX-512), one thread, fp32, a 128,256 x 256 output
projection (`bench/bench_lm_head.py`): 4 rows take 7-10 ms packed, 10-14 ms as MKL's
weight @ hidden^T and 25-29 ms as `nn.Linear`'s hidden @ weight^T; 8 rows 9-10 ms packed
against 16 ms. vLLM's CPU build packs its linear layers the same way (its `onednn_mm`).

The products are the same fp32 multiply-adds summed in another order: the logits equal
`nn.Linear`'s up to float rounding. The packed copy is made on first use and again whenever
the weight changes (another tensor, or an in-place write, seen by its version counter); it
costs one more copy of the weight in memory (`packed_bytes`).
"""

from __future__ import annotations

import torch

BATCH_HINT = 32
"""The row count oneDNN plans the packed layout for; measured as good from 1 to 32 rows."""


def packing_applies(weight: torch.Tensor) -> bool:
    """True where a packed copy of `weight` is used: fp32 on the CPU, with oneDNN's ops."""
    return (
        weight.device.type == "cpu"
        and weight.dtype == torch.float32
        and weight.dim() == 2
        and torch.backends.mkldnn.is_available()
        and hasattr(torch.ops.mkldnn, "_linear_pointwise")
        and hasattr(torch.ops.mkldnn, "_reorder_linear_weight")
    )


def packed_bytes(num_rows: int, num_columns: int, element: int) -> int:
    """The memory a packed copy of a [num_rows, num_columns] weight takes (one more copy)."""
    return num_rows * num_columns * element


class PackedWeight:
    """The packed copy of one weight and the product with it; `None` from `linear` where it
    does not apply (another device or dtype, or oneDNN refused once: never tried again)."""

    def __init__(self) -> None:
        self._key: tuple[int, int, tuple[int, ...]] | None = None
        self._packed: torch.Tensor | None = None
        self._refused = False

    def prepare(self, weight: torch.Tensor) -> bool:
        """Pack `weight` now (not in the first step that uses it); False where it does not
        apply."""
        if self._refused or not packing_applies(weight):
            return False
        try:
            self._current(weight)
        except RuntimeError:
            self._refused = True
            return False
        return True

    def linear(self, hidden: torch.Tensor, weight: torch.Tensor) -> torch.Tensor | None:
        """hidden @ weight^T in fp32 through the packed copy, or None."""
        if self._refused or hidden.dim() != 2 or not packing_applies(weight):
            return None
        if hidden.dtype != weight.dtype or hidden.device != weight.device:
            return None
        try:
            packed = self._current(weight)
            return torch.ops.mkldnn._linear_pointwise(
                hidden.contiguous(), packed, None, "none", [], ""
            )
        except RuntimeError:  # an oneDNN build that cannot: the plain product from now on
            self._refused = True
            self._key = self._packed = None
            return None

    def _current(self, weight: torch.Tensor) -> torch.Tensor:
        key = (weight.data_ptr(), _version(weight), tuple(weight.shape))
        if key != self._key or self._packed is None:
            with torch.inference_mode():
                self._packed = torch.ops.mkldnn._reorder_linear_weight(weight.detach(), BATCH_HINT)
            self._key = key
        return self._packed


def _version(tensor: torch.Tensor) -> int:
    """The tensor's in-place write counter (an inference tensor has none: it never changes
    outside inference mode, where nothing writes weights)."""
    try:
        return tensor._version
    except RuntimeError:
        return -1
