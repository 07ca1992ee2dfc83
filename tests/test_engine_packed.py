"""oneDNN's packed weights: the same products as nn.Linear, repacked when the weight changes."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from pcache.engine.models.packed import PackedWeight, packing_applies  # noqa: E402

needs_onednn = pytest.mark.skipif(
    not packing_applies(torch.empty(1, 1)), reason="this torch has no oneDNN linear ops"
)


@needs_onednn
@pytest.mark.parametrize("rows", [1, 3, 4, 8, 33])
def test_packed_product_equals_the_linear_layer(rows):
    generator = torch.Generator().manual_seed(rows)
    weight = torch.randn(1000, 64, generator=generator)
    hidden = torch.randn(rows, 64, generator=generator)
    packed = PackedWeight()
    logits = packed.linear(hidden, weight)
    assert logits is not None and logits.shape == (rows, 1000)
    expected = torch.nn.functional.linear(hidden, weight)
    assert torch.allclose(logits, expected, rtol=1e-5, atol=1e-5)


@needs_onednn
def test_a_weight_written_in_place_or_replaced_is_packed_again():
    weight = torch.randn(256, 32)
    hidden = torch.randn(4, 32)
    packed = PackedWeight()
    assert packed.prepare(weight)
    before = packed.linear(hidden, weight)
    weight.mul_(2)  # an in-place write bumps the version counter
    assert torch.allclose(packed.linear(hidden, weight), 2 * before, rtol=1e-5, atol=1e-5)
    other = torch.randn(256, 32)
    assert torch.allclose(packed.linear(hidden, other), hidden @ other.t(), rtol=1e-5, atol=1e-5)


def test_other_dtypes_and_shapes_take_the_plain_product():
    packed = PackedWeight()
    weight = torch.randn(16, 8, dtype=torch.bfloat16)
    assert not packed.prepare(weight)
    assert packed.linear(torch.randn(2, 8, dtype=torch.bfloat16), weight) is None
    assert packed.linear(torch.randn(2, 3, 8), torch.randn(16, 8)) is None


@needs_onednn
def test_a_refusal_falls_back_for_good(monkeypatch):
    packed = PackedWeight()

    def refuse(*arguments):
        raise RuntimeError("no oneDNN kernel for this machine")

    monkeypatch.setattr(torch.ops.mkldnn, "_reorder_linear_weight", refuse, raising=False)
    assert packed.linear(torch.randn(2, 8), torch.randn(16, 8)) is None
    monkeypatch.undo()
    assert packed.linear(torch.randn(2, 8), torch.randn(16, 8)) is None
