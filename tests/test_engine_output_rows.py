"""The last layer computes only the rows that sample: their hidden states are the full pass's,
and every row's K/V is stored as the full pass stores it."""

from __future__ import annotations

import os

import pytest

torch = pytest.importorskip("torch")
ON_GPU = torch.cuda.is_available()
if not ON_GPU:
    os.environ.setdefault("TRITON_INTERPRET", "1")  # read at launch time; set before import
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from pcache.engine.config import EngineConfig  # noqa: E402
from pcache.engine.engine import Engine  # noqa: E402


def checked_engine(preset: str, backend: str, max_num_batched_tokens: int):
    """An engine whose model runs every step twice, all rows then the output rows alone, and
    records each comparison: (output rows, max difference, whether the caches were equal)."""
    engine = Engine(
        EngineConfig(
            model=preset,
            device="cuda" if ON_GPU else "cpu",
            dtype="float32",
            attention_backend=backend,
            max_num_batched_tokens=max_num_batched_tokens,
            kv_cache_tokens=2048,
        )
    )
    model = engine.runner.model
    original = model.forward
    layers = model.attention_layers()
    comparisons: list[tuple[int, float, bool]] = []

    def forward(input_ids, positions, output_rows=None):
        full = original(input_ids, positions)
        caches = [(layer.k_cache.clone(), layer.v_cache.clone()) for layer in layers]
        produced = original(input_ids, positions, output_rows)
        same_caches = all(
            torch.equal(k, layer.k_cache) and torch.equal(v, layer.v_cache)
            for (k, v), layer in zip(caches, layers, strict=True)
        )
        expected = full if output_rows is None else full[output_rows]
        assert produced.shape == expected.shape
        difference = (produced - expected).abs().max().item() if expected.numel() else 0.0
        comparisons.append((expected.shape[0], difference, same_caches))
        return produced

    model.forward = forward
    return engine, comparisons


@pytest.mark.parametrize("backend", ["torch", "triton"])
@pytest.mark.parametrize("preset", ["tiny-llama", "tiny-qwen3"])
@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    lengths=st.lists(st.integers(1, 40), min_size=1, max_size=4),
    shared=st.integers(0, 40),
    chunk=st.sampled_from([8192, 24]),
)
def test_output_rows_equal_the_full_pass(preset, backend, lengths, shared, chunk):
    if backend == "triton":
        pytest.importorskip("triton", reason="triton is not installed (pip install 'pcache[gpu]')")
    engine, comparisons = checked_engine(preset, backend, chunk)
    prefix = list(range(5, 5 + shared))
    engine.generate([[*prefix, 3]], 2, ignore_eos=True)  # cached blocks for the others
    prompts = [[*prefix, *range(100 + n, 100 + 2 * n)] for n in lengths]
    engine.generate(prompts, 3, ignore_eos=True)
    assert comparisons
    for rows, difference, same_caches in comparisons:
        assert same_caches, "the output-rows pass stored other K/V"
        assert difference <= 1e-5, f"{rows} output rows differ by {difference:.2e}"
    assert any(rows > 0 for rows, _, _ in comparisons)
