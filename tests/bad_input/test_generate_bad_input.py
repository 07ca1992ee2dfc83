"""`pcache generate`: limits are checked, and blamed correctly, before anything is allocated."""

from __future__ import annotations

import json

import pytest

from tests.bad_input.checks import assert_one_line_error, unchanged

pytest.importorskip("torch")


def test_positions_are_blamed_before_memory(cli):
    for tokens in ("1000000", "1000000000"):
        result = cli("generate", "--model", "tiny", "--prompt", "hi", "-n", tokens)
        assert_one_line_error(result, f"{tokens} new tokens exceed the 2048 positions of tiny")


def test_ids_beyond_the_vocabulary_name_the_file(cli, tmp_path):
    prompts = tmp_path / "prompts.json"
    prompts.write_text(json.dumps([[1, 2**33]]))
    with unchanged(tmp_path):
        result = cli("generate", "--model", "tiny", "--prompt-ids", prompts)
    assert_one_line_error(result, f"{prompts}: prompt 0: token id 8589934592 is outside")


@pytest.mark.parametrize(
    ("change", "fragment"),
    [
        ({"max_position_embeddings": 10**12}, "max_position_embeddings must be between 1 and"),
        ({"num_attention_heads": 0}, "num_attention_heads must be between 1 and"),
        ({"hidden_size": "64"}, "hidden_size must be an integer"),
        ({"rope_theta": -1}, "rope_theta must be greater than 0"),
        ({"num_key_value_heads": 3}, "must be a multiple of num_key_value_heads (3)"),
    ],
)
def test_a_bad_model_config_is_named(cli, tmp_path, change, fragment):
    config = {
        "architectures": ["LlamaForCausalLM"],
        "hidden_size": 64,
        "intermediate_size": 128,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "vocab_size": 256,
        "max_position_embeddings": 128,
    }
    (tmp_path / "config.json").write_text(json.dumps({**config, **change}))
    with unchanged(tmp_path):
        result = cli("generate", "--model", tmp_path, "--prompt-ids", "-", input="[[1, 2]]")
    assert_one_line_error(result, str(tmp_path / "config.json"), fragment)


def test_the_memory_plan_counts_rotary_tables(monkeypatch):
    from pcache.engine import kv_cache
    from pcache.engine.config import EngineConfig
    from pcache.engine.model_config import resolve_model_config
    from pcache.errors import EngineError

    model, _ = resolve_model_config("tiny")
    config = EngineConfig(model="tiny", kv_cache_tokens=64)
    room = kv_cache.rotary_bytes(2048, model.head_dim) + 64 * 2**20
    monkeypatch.setattr(kv_cache, "available_host_memory", lambda: int(room / 0.8))
    import torch

    kv_cache.plan_num_blocks(config, model, torch.float32, 2048)
    with pytest.raises(EngineError, match=r"rotary tables \(2000000 positions\)"):
        kv_cache.plan_num_blocks(config, model, torch.float32, 2_000_000)
