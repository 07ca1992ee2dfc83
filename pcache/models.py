"""The model table: every model name any command accepts, as a Hugging Face `config.json`.

`generate --model` and `replay --engine --model` build these shapes with seeded random weights;
`replay --simulate --model` reads their KV bytes per token (`pcache.cache.capacity`). Shapes of
architectures the engine does not run (gpt-oss) size a simulated cache only. `ALIASES` keeps
older spellings working.
"""

from __future__ import annotations

from typing import Any

from pcache.defaults import DEFAULT_MODEL as DEFAULT_MODEL  # read here by the report
from pcache.errors import EngineError


def _tiny(family: str, architecture: str, **extra: Any) -> dict[str, Any]:
    return {
        "architectures": [architecture],
        "model_type": family,
        "vocab_size": 512,
        "hidden_size": 64,
        "intermediate_size": 128,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "head_dim": 16,
        "rms_norm_eps": 1e-6,
        "rope_theta": 10000.0,
        "max_position_embeddings": 2048,
        "tie_word_embeddings": False,
        **extra,
    }


def _kv_shape_only(
    architecture: str,
    family: str,
    layers: int,
    heads: int,
    kv_heads: int,
    head_dim: int,
    hidden: int,
) -> dict[str, Any]:
    return {
        "architectures": [architecture],
        "model_type": family,
        "hidden_size": hidden,
        "num_hidden_layers": layers,
        "num_attention_heads": heads,
        "num_key_value_heads": kv_heads,
        "head_dim": head_dim,
    }


PRESETS: dict[str, dict[str, Any]] = {
    "tiny-llama": _tiny(
        "llama",
        "LlamaForCausalLM",
        rope_theta=500000.0,
        rope_scaling={
            "rope_type": "llama3",
            "factor": 8.0,
            "low_freq_factor": 1.0,
            "high_freq_factor": 4.0,
            "original_max_position_embeddings": 256,
        },
    ),
    "tiny-qwen2": _tiny("qwen2", "Qwen2ForCausalLM", tie_word_embeddings=True),
    "tiny-qwen3": _tiny("qwen3", "Qwen3ForCausalLM", attention_bias=False),
    "qwen3-0.6b": {
        "architectures": ["Qwen3ForCausalLM"],
        "model_type": "qwen3",
        "vocab_size": 151936,
        "hidden_size": 1024,
        "intermediate_size": 3072,
        "num_hidden_layers": 28,
        "num_attention_heads": 16,
        "num_key_value_heads": 8,
        "head_dim": 128,
        "rms_norm_eps": 1e-6,
        "rope_theta": 1000000.0,
        "max_position_embeddings": 40960,
        "tie_word_embeddings": True,
        "attention_bias": False,
    },
    "llama3-1b": {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "vocab_size": 128256,
        "hidden_size": 2048,
        "intermediate_size": 8192,
        "num_hidden_layers": 16,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "head_dim": 64,
        "rms_norm_eps": 1e-5,
        "rope_theta": 500000.0,
        "rope_scaling": {
            "rope_type": "llama3",
            "factor": 32.0,
            "low_freq_factor": 1.0,
            "high_freq_factor": 4.0,
            "original_max_position_embeddings": 8192,
        },
        "max_position_embeddings": 131072,
        "tie_word_embeddings": True,
    },
    "llama3-8b": {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "vocab_size": 128256,
        "hidden_size": 4096,
        "intermediate_size": 14336,
        "num_hidden_layers": 32,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "head_dim": 128,
        "rms_norm_eps": 1e-5,
        "rope_theta": 500000.0,
        "rope_scaling": {
            "rope_type": "llama3",
            "factor": 8.0,
            "low_freq_factor": 1.0,
            "high_freq_factor": 4.0,
            "original_max_position_embeddings": 8192,
        },
        "max_position_embeddings": 8192,
        "tie_word_embeddings": False,
    },
    "llama3-70b": {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "vocab_size": 128256,
        "hidden_size": 8192,
        "intermediate_size": 28672,
        "num_hidden_layers": 80,
        "num_attention_heads": 64,
        "num_key_value_heads": 8,
        "head_dim": 128,
        "rms_norm_eps": 1e-5,
        "rope_theta": 500000.0,
        "rope_scaling": {
            "rope_type": "llama3",
            "factor": 8.0,
            "low_freq_factor": 1.0,
            "high_freq_factor": 4.0,
            "original_max_position_embeddings": 8192,
        },
        "max_position_embeddings": 8192,
        "tie_word_embeddings": False,
    },
    "qwen2.5-7b": {
        "architectures": ["Qwen2ForCausalLM"],
        "model_type": "qwen2",
        "vocab_size": 152064,
        "hidden_size": 3584,
        "intermediate_size": 18944,
        "num_hidden_layers": 28,
        "num_attention_heads": 28,
        "num_key_value_heads": 4,
        "head_dim": 128,
        "rms_norm_eps": 1e-6,
        "rope_theta": 1000000.0,
        "max_position_embeddings": 32768,
        "tie_word_embeddings": False,
    },
    "qwen3-8b": {
        "architectures": ["Qwen3ForCausalLM"],
        "model_type": "qwen3",
        "vocab_size": 151936,
        "hidden_size": 4096,
        "intermediate_size": 12288,
        "num_hidden_layers": 36,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "head_dim": 128,
        "rms_norm_eps": 1e-6,
        "rope_theta": 1000000.0,
        "max_position_embeddings": 40960,
        "tie_word_embeddings": False,
        "attention_bias": False,
    },
    "gpt-oss-20b": _kv_shape_only("GptOssForCausalLM", "gpt_oss", 24, 64, 8, 64, 2880),
    "gpt-oss-120b": _kv_shape_only("GptOssForCausalLM", "gpt_oss", 36, 64, 8, 64, 2880),
}
PRESETS["tiny"] = PRESETS["tiny-qwen3"]
ALIASES = {"llama-3-8b": "llama3-8b", "llama-3-70b": "llama3-70b"}


def canonical_name(name: str) -> str | None:
    """The table's name for `name` (an alias resolved), or None when it names no preset."""
    name = ALIASES.get(name, name)
    return name if name in PRESETS else None


def preset_config(name: str) -> dict[str, Any]:
    """The `config.json` dictionary of a preset; unknown names raise EngineError."""
    canonical = canonical_name(name)
    if canonical is None:
        raise EngineError(f"unknown model preset {name!r} (choose from {', '.join(PRESETS)})")
    return dict(PRESETS[canonical])
