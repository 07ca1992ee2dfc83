"""The engine against transformers' own models: same weights from disk, same logits and tokens."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("safetensors")

from pcache.engine.config import EngineConfig  # noqa: E402
from pcache.engine.engine import Engine  # noqa: E402
from tests.engine_helpers import (  # noqa: E402
    reference_greedy,
    reference_greedy_batch,
    save_reference_checkpoint,
)

NUM_NEW_TOKENS = 32
PROMPT_LENGTHS = (1, 7, 16, 17, 40)


def prompts(lengths, vocab: int, seed: int = 1) -> list[list[int]]:
    generator = torch.Generator().manual_seed(seed)
    return [torch.randint(0, vocab, (n,), generator=generator).tolist() for n in lengths]


@pytest.fixture(scope="module", params=["tiny-llama", "tiny-qwen2", "tiny-qwen3"])
def checkpoint(request, tmp_path_factory):
    directory = tmp_path_factory.mktemp(request.param)
    model = save_reference_checkpoint(request.param, directory)
    batch = prompts(PROMPT_LENGTHS, model.config.vocab_size)
    expected = [reference_greedy(model, prompt, NUM_NEW_TOKENS) for prompt in batch]
    return directory, batch, expected


def assert_same(sequences, expected) -> None:
    for sequence, (tokens, logits) in zip(sequences, expected, strict=True):
        produced = torch.stack(sequence.logits)
        assert produced.shape == logits.shape
        error = (produced - logits).abs().max().item() / logits.abs().max().item()
        assert error <= 1e-4, f"relative logits error {error:.2e}"
        assert sequence.output_token_ids == tokens


@pytest.mark.parametrize(
    ("block_size", "max_num_batched_tokens"),
    [(16, 8192), (32, 8192), (16, 24), (1, 8192)],
    ids=["block16", "block32", "chunked-prefill", "block1"],
)
def test_logits_and_greedy_tokens_match_transformers(
    checkpoint, block_size, max_num_batched_tokens
):
    directory, batch, expected = checkpoint
    engine = Engine(
        EngineConfig(
            model=str(directory),
            block_size=block_size,
            max_num_batched_tokens=max_num_batched_tokens,
            kv_cache_tokens=2048,
            record_logits=True,
        )
    )
    sequences = engine.generate(batch, NUM_NEW_TOKENS, ignore_eos=True)
    assert_same(sequences, expected)
    engine.check_integrity()


@pytest.mark.slow
def test_qwen3_0_6b_shape_matches_transformers(tmp_path):
    model = save_reference_checkpoint("qwen3-0.6b", tmp_path)
    batch = prompts((3, 20), model.config.vocab_size)
    expected = reference_greedy_batch(model, batch, NUM_NEW_TOKENS)
    del model
    engine = Engine(EngineConfig(model=str(tmp_path), kv_cache_tokens=256, record_logits=True))
    assert_same(engine.generate(batch, NUM_NEW_TOKENS, ignore_eos=True), expected)


@pytest.mark.parametrize("rows", [1, 2, 4, 8, 9])
def test_logits_of_a_large_vocabulary_equal_the_linear_layers(rows):
    """A decode step's few rows (through oneDNN's reordered weight on the CPU, else
    weight @ hidden^T): the same logits as x @ W^T, up to float rounding, and the same
    greedy tokens."""
    from pcache.engine.loader import build_model, random_init
    from pcache.engine.model_config import model_config_from_dict
    from pcache.models import preset_config

    config = model_config_from_dict({**preset_config("tiny-llama"), "vocab_size": 32768})
    model = build_model(config, torch.float32, torch.device("cpu"), 64)
    random_init(model, seed=3)
    hidden = torch.randn(rows, config.hidden_size, generator=torch.Generator().manual_seed(rows))
    logits = model.compute_logits(hidden)
    expected = torch.nn.functional.linear(hidden, model.lm_head.weight)
    assert logits.shape == expected.shape == (rows, 32768)
    assert torch.allclose(logits, expected, rtol=1e-5, atol=1e-5)
    assert torch.equal(logits.argmax(dim=-1), expected.argmax(dim=-1))
