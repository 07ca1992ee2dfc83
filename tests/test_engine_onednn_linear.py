"""oneDNN's reordered weights: the same products as nn.Linear, reordered again when the weight
changes, and nn.Linear itself wherever they do not apply."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from pcache.engine.models import onednn_linear  # noqa: E402
from pcache.engine.models.onednn_linear import ReorderedWeight, reorder_applies  # noqa: E402

needs_onednn = pytest.mark.skipif(
    not reorder_applies(torch.empty(1, 1)), reason="this torch has no oneDNN linear ops"
)


@needs_onednn
@pytest.mark.parametrize("rows", [1, 3, 4, 8, 33, 300])
def test_reordered_product_equals_the_linear_layer(rows):
    generator = torch.Generator().manual_seed(rows)
    weight = torch.randn(1000, 64, generator=generator)
    bias = torch.randn(1000, generator=generator)
    hidden = torch.randn(rows, 64, generator=generator)
    reordered = ReorderedWeight()
    for with_bias in (None, bias):
        output = reordered.linear(hidden, weight, with_bias)
        assert output is not None and output.shape == (rows, 1000)
        expected = torch.nn.functional.linear(hidden, weight, with_bias)
        assert torch.allclose(output, expected, rtol=1e-5, atol=1e-5)


@needs_onednn
def test_a_weight_written_in_place_or_replaced_is_reordered_again():
    weight = torch.randn(256, 32)
    hidden = torch.randn(4, 32)
    reordered = ReorderedWeight()
    assert reordered.prepare(weight)
    before = reordered.linear(hidden, weight)
    weight.mul_(2)  # an in-place write bumps the version counter
    assert torch.allclose(reordered.linear(hidden, weight), 2 * before, rtol=1e-5, atol=1e-5)
    other = torch.randn(256, 32)
    assert torch.allclose(reordered.linear(hidden, other), hidden @ other.t(), rtol=1e-5, atol=1e-5)


@needs_onednn
def test_the_layer_is_nn_linear_with_its_names_and_outputs():
    layer = onednn_linear.Linear(32, 48)
    plain = torch.nn.Linear(32, 48)
    assert layer.state_dict().keys() == plain.state_dict().keys()
    plain.load_state_dict(layer.state_dict())
    assert layer.prepare()
    hidden = torch.randn(5, 32)
    with torch.inference_mode():
        assert torch.allclose(layer(hidden), plain(hidden), rtol=1e-5, atol=1e-5)
        batched = torch.randn(2, 5, 32)  # not 2-D: nn.Linear's own product
        assert torch.equal(layer(batched), plain(batched))


def test_other_dtypes_and_shapes_take_the_plain_product():
    reordered = ReorderedWeight()
    weight = torch.randn(16, 8, dtype=torch.bfloat16)
    assert not reordered.prepare(weight)
    assert reordered.linear(torch.randn(2, 8, dtype=torch.bfloat16), weight) is None
    assert reordered.linear(torch.randn(2, 3, 8), torch.randn(16, 8)) is None
    layer = onednn_linear.Linear(8, 16).to(torch.bfloat16)
    hidden = torch.randn(2, 8, dtype=torch.bfloat16)
    assert torch.equal(layer(hidden), torch.nn.functional.linear(hidden, layer.weight, layer.bias))


@needs_onednn
def test_switching_onednn_off_takes_the_plain_product(monkeypatch):
    monkeypatch.setattr(torch.backends.mkldnn, "enabled", False)
    assert ReorderedWeight().linear(torch.randn(2, 8), torch.randn(16, 8)) is None


@needs_onednn
def test_a_refusal_falls_back_for_good(monkeypatch):
    reordered = ReorderedWeight()

    def refuse(*arguments):
        raise RuntimeError("no oneDNN kernel for this machine")

    monkeypatch.setattr(torch.ops.mkldnn, "_reorder_linear_weight", refuse, raising=False)
    assert reordered.linear(torch.randn(2, 8), torch.randn(16, 8)) is None
    monkeypatch.undo()
    assert reordered.linear(torch.randn(2, 8), torch.randn(16, 8)) is None
    assert reordered.prepare(torch.randn(16, 8)) is False


@needs_onednn
def test_the_cpu_engine_runs_every_linear_layer_reordered(monkeypatch):
    """An fp32 CPU engine reorders its weights when it loads them; its greedy tokens are the
    plain products' (the same engine with reordering switched off)."""
    from pcache.engine.config import EngineConfig
    from pcache.engine.engine import Engine

    prompts = [[1, 2, 3, 4, 5], list(range(7, 40))]
    engine = Engine(EngineConfig(model="tiny-llama", kv_cache_tokens=512))
    layers = [m for m in engine.runner.model.modules() if isinstance(m, onednn_linear.Linear)]
    assert len(layers) == 4 * engine.model_config.num_layers + 1  # qkv, o, gate_up, down; head
    assert all(layer.reordered._reordered is not None for layer in layers)
    reordered = [s.output_token_ids for s in engine.generate(prompts, 8, ignore_eos=True)]

    monkeypatch.setattr(onednn_linear, "reorder_applies", lambda weight: False)
    plain_engine = Engine(EngineConfig(model="tiny-llama", kv_cache_tokens=512))
    plain = [s.output_token_ids for s in plain_engine.generate(prompts, 8, ignore_eos=True)]
    assert reordered == plain
