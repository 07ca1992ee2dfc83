"""The shape of a decoder model, read from a Hugging Face `config.json` (no torch needed)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pcache.errors import EngineError

ARCHITECTURES = {
    "LlamaForCausalLM": "llama",
    "Qwen2ForCausalLM": "qwen2",
    "Qwen3ForCausalLM": "qwen3",
}
ROPE_TYPES = ("default", "linear", "llama3")
MAX_DIMENSION = 1 << 31
"""No dimension of a real model comes near this; a bigger one is a broken config."""
_DIMENSIONS = (
    "hidden_size",
    "intermediate_size",
    "num_hidden_layers",
    "num_attention_heads",
    "num_key_value_heads",
    "head_dim",
    "vocab_size",
    "max_position_embeddings",
)
_POSITIVE_REALS = ("rms_norm_eps", "rope_theta")


def _check_numbers(data: dict[str, Any], source: str) -> None:
    """Every number the engine sizes or computes with: an integer in range, or finite > 0."""
    from pcache.errors import UsageError
    from pcache.options.numbers import check_number

    for key in _DIMENSIONS + _POSITIVE_REALS:
        value = data.get(key)
        if value is None:
            continue
        integer = key in _DIMENSIONS
        if isinstance(value, bool) or not isinstance(value, int if integer else int | float):
            kind = "an integer" if integer else "a number"
            raise EngineError(f"{source}: {key} must be {kind}, got {value!r}")
        try:
            if integer:
                check_number(key, value, minimum=1, maximum=MAX_DIMENSION)
            else:
                check_number(key, value, above=0)
        except UsageError as failure:
            raise EngineError(f"{source}: {failure}") from None
    rope = data.get("rope_parameters") or data.get("rope_scaling")
    if rope is not None and not isinstance(rope, dict):
        raise EngineError(f"{source}: rope_scaling must be an object, got {rope!r}")
    eos = data.get("eos_token_id")
    eos_ids = eos if isinstance(eos, list) else [eos]
    if eos is not None and not all(type(i) is int and i >= 0 for i in eos_ids):
        raise EngineError(f"{source}: eos_token_id must be a token id or a list of them")
    architectures = data.get("architectures")
    if architectures is not None and not (
        isinstance(architectures, list) and all(isinstance(a, str) for a in architectures)
    ):
        raise EngineError(f"{source}: architectures must be a list of names")
    heads = data.get("num_attention_heads")
    kv_heads = data.get("num_key_value_heads") or heads
    if heads and kv_heads and heads % kv_heads:
        raise EngineError(
            f"{source}: num_attention_heads ({heads}) must be a multiple of"
            f" num_key_value_heads ({kv_heads})"
        )
    hidden, head_dim = data.get("hidden_size"), data.get("head_dim")
    if head_dim is None and hidden and heads:
        head_dim = hidden // heads
    if head_dim is not None and (head_dim < 2 or head_dim % 2):
        raise EngineError(f"{source}: head_dim must be even and at least 2, got {head_dim}")


@dataclass(frozen=True, slots=True)
class ModelConfig:
    """Architecture family and dimensions of a Llama / Qwen2 / Qwen3 decoder."""

    family: str
    vocab_size: int
    hidden_size: int
    intermediate_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    rms_norm_eps: float = 1e-6
    rope_theta: float = 10000.0
    rope_scaling: dict[str, Any] = field(default_factory=dict)
    max_position_embeddings: int = 4096
    tie_word_embeddings: bool = False
    attention_bias: bool = False
    output_bias: bool = False
    mlp_bias: bool = False
    eos_token_ids: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        assert self.family in ARCHITECTURES.values()
        assert self.num_heads % self.num_kv_heads == 0
        assert self.head_dim % 2 == 0

    @property
    def has_qk_norm(self) -> bool:
        return self.family == "qwen3"

    @property
    def q_size(self) -> int:
        return self.num_heads * self.head_dim

    @property
    def kv_size(self) -> int:
        return self.num_kv_heads * self.head_dim

    def num_parameters(self) -> int:
        hidden, inner = self.hidden_size, self.intermediate_size
        per_layer = hidden * (self.q_size + 2 * self.kv_size) + self.q_size * hidden
        per_layer += 3 * hidden * inner + 2 * hidden
        if self.has_qk_norm:
            per_layer += 2 * self.head_dim
        embeddings = self.vocab_size * hidden * (1 if self.tie_word_embeddings else 2)
        return self.num_layers * per_layer + embeddings + hidden

    def num_linear_weights(self) -> int:
        """The weights of the linear layers (projections and output head, no biases): what
        the CPU keeps a reordered copy of (`pcache.engine.models.onednn_linear`)."""
        hidden, inner = self.hidden_size, self.intermediate_size
        per_layer = hidden * (self.q_size + 2 * self.kv_size) + self.q_size * hidden
        per_layer += 3 * hidden * inner
        return self.num_layers * per_layer + self.vocab_size * hidden

    def kv_bytes_per_token(self, dtype_bytes: int) -> int:
        return 2 * self.num_layers * self.kv_size * dtype_bytes


def model_config_from_dict(data: dict[str, Any], source: str = "config.json") -> ModelConfig:
    """Validate a `config.json` dictionary; unsupported models raise EngineError."""
    _check_numbers(data, source)
    architectures = data.get("architectures") or []
    family = ARCHITECTURES.get(architectures[0]) if architectures else None
    if family is None:
        family = {"llama": "llama", "qwen2": "qwen2", "qwen3": "qwen3"}.get(data.get("model_type"))
    if family is None:
        named = architectures[0] if architectures else data.get("model_type", "none")
        raise EngineError(
            f"{source}: unsupported architecture {named!r} (supported: {', '.join(ARCHITECTURES)})"
        )
    if data.get("use_sliding_window"):
        raise EngineError(f"{source}: sliding-window attention is not supported")
    try:
        hidden = int(data["hidden_size"])
        num_heads = int(data["num_attention_heads"])
        rope = dict(data.get("rope_parameters") or data.get("rope_scaling") or {})
        rope_theta = float(rope.pop("rope_theta", data.get("rope_theta", 10000.0)))
        rope_type = rope.get("rope_type", rope.get("type", "default"))
        rope["rope_type"] = rope_type
        rope.pop("type", None)
        eos = data.get("eos_token_id")
        eos_ids = () if eos is None else tuple(eos) if isinstance(eos, list) else (int(eos),)
        config = ModelConfig(
            family=family,
            vocab_size=int(data["vocab_size"]),
            hidden_size=hidden,
            intermediate_size=int(data["intermediate_size"]),
            num_layers=int(data["num_hidden_layers"]),
            num_heads=num_heads,
            num_kv_heads=int(data.get("num_key_value_heads") or num_heads),
            head_dim=int(data.get("head_dim") or hidden // num_heads),
            rms_norm_eps=float(data.get("rms_norm_eps", 1e-6)),
            rope_theta=rope_theta,
            rope_scaling=rope,
            max_position_embeddings=int(data.get("max_position_embeddings", 4096)),
            tie_word_embeddings=bool(data.get("tie_word_embeddings", False)),
            attention_bias=family == "qwen2" or bool(data.get("attention_bias", False)),
            output_bias=family != "qwen2" and bool(data.get("attention_bias", False)),
            mlp_bias=bool(data.get("mlp_bias", False)),
            eos_token_ids=eos_ids,
        )
    except KeyError as failure:
        raise EngineError(f"{source}: missing {failure.args[0]!r}") from None
    except (TypeError, ValueError, AssertionError) as failure:
        raise EngineError(f"{source}: invalid model config ({failure})") from None
    if rope_type not in ROPE_TYPES:
        raise EngineError(
            f"{source}: unsupported rope_type {rope_type!r} (supported: {', '.join(ROPE_TYPES)})"
        )
    return config


def resolve_model_config(model: str) -> tuple[ModelConfig, Path | None]:
    """A preset name gives its shape and no directory; a directory gives its config.json."""
    from pcache.models import PRESETS, canonical_name, preset_config

    if canonical_name(model) is not None:
        return model_config_from_dict(preset_config(model), f"preset {model}"), None
    directory = Path(model)
    if not directory.is_dir():
        raise EngineError(
            f"{model}: not a model directory nor a preset (presets: {', '.join(PRESETS)})"
        )
    config_path = directory / "config.json"
    if not config_path.exists():
        raise EngineError(f"{config_path}: no config.json in the model directory")
    from pcache.prompt.reading.loading import parse_json, read_bytes

    data = parse_json(read_bytes(config_path), str(config_path))
    if not isinstance(data, dict):
        raise EngineError(f"{config_path}: expected a JSON object")
    return model_config_from_dict(data, str(config_path)), directory
