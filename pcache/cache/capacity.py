"""KV bytes per token of a model shape, and cache capacity in blocks from a memory budget.

KV bytes per token = 2 (K and V) x layers x kv_heads x head_dim x dtype bytes. The shape comes
from the model table (`pcache.models`) or a Hugging Face `config.json` (a file or a directory
holding one).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from pcache.errors import ConfigError, OptionError, UsageError
from pcache.models import PRESETS, canonical_name
from pcache.options.numbers import check_number

MAX_DIMENSION = 1 << 31

DTYPE_BYTES = {"float32": 4, "float16": 2, "bfloat16": 2, "fp8": 1, "float8_e4m3fn": 1}


@dataclass(frozen=True, slots=True)
class ModelShape:
    """What sizes a model's KV cache."""

    name: str
    num_layers: int
    num_kv_heads: int
    head_dim: int
    dtype_bytes: int = 2

    @property
    def kv_bytes_per_token(self) -> int:
        return 2 * self.num_layers * self.num_kv_heads * self.head_dim * self.dtype_bytes


def _shape(name: str, config: dict, path: Path | None = None) -> ModelShape:
    where = str(path) if path is not None else f"model {name}"
    config = config.get("text_config", config)
    if not isinstance(config, dict):
        raise ConfigError(f"{where}: text_config must be an object")

    def dimension(key: str, default: int | None = None) -> int:
        value = config.get(key)
        value = default if value is None else value
        if value is None:
            raise ConfigError(f"{where}: missing {key}")
        if type(value) is not int:
            raise ConfigError(f"{where}: {key} must be an integer, got {value!r}")
        try:
            return int(check_number(key, value, minimum=1, maximum=MAX_DIMENSION))
        except UsageError as failure:
            raise ConfigError(f"{where}: {failure}") from None

    layers = dimension("num_hidden_layers")
    heads = dimension("num_attention_heads")
    kv_heads = dimension("num_key_value_heads", heads)
    if config.get("head_dim") is not None:
        head_dim = dimension("head_dim")
    else:
        head_dim = max(dimension("hidden_size") // heads, 1)
    dtype = str(config.get("torch_dtype") or config.get("dtype") or "bfloat16")
    return ModelShape(name, layers, kv_heads, head_dim, DTYPE_BYTES.get(dtype, 2))


def resolve_model(name_or_path: str) -> ModelShape:
    """The KV shape of a model of the table (`pcache.models`), or of a config.json."""
    canonical = canonical_name(name_or_path)
    if canonical is not None:
        return _shape(canonical, PRESETS[canonical])
    path = Path(name_or_path)
    if path.is_dir():
        path = path / "config.json"
    if not path.exists():
        reason = f"{name_or_path!r} is neither a preset ({', '.join(PRESETS)}) nor a config.json"
        raise OptionError("model", reason)
    from pcache.prompt.reading.loading import parse_json, read_bytes

    config = parse_json(read_bytes(path), str(path))
    if not isinstance(config, dict):
        raise ConfigError(f"{path}: expected a JSON object")
    return _shape(path.parent.name or str(path), config, path)


def blocks_for_gigabytes(gigabytes: float, shape: ModelShape, block_size: int) -> int:
    """Whole KV blocks that fit in `gigabytes` (GiB) for this model."""
    if not 0 < gigabytes < math.inf:  # also refuses NaN
        raise OptionError("cache_gb", f"must be a positive number, got {gigabytes}")
    return int(gigabytes * 2**30 // (shape.kv_bytes_per_token * block_size))
