"""Build a model from a preset (seeded random weights) or a local checkpoint directory."""

from __future__ import annotations

from pathlib import Path

import torch

from pcache.engine.model_config import ModelConfig
from pcache.engine.models.decoder import PACKED_MODULES, CausalLM
from pcache.errors import EngineError

IGNORED_SUFFIXES = ("rotary_emb.inv_freq",)
# with tied embeddings the output projection is the embedding, whatever a checkpoint holds


def build_model(
    config: ModelConfig, dtype: torch.dtype, device: torch.device, max_positions: int
) -> CausalLM:
    """Allocate an uninitialized model (no default init pass over the weights)."""
    default_dtype = torch.get_default_dtype()
    torch.set_default_dtype(dtype)  # parameters are born in their final dtype
    try:
        with torch.device("meta"):
            model = CausalLM(config, max_positions)
    finally:
        torch.set_default_dtype(default_dtype)
    model = model.to_empty(device=device)
    # buffers (rotary tables) were lost by to_empty: rebuild them on the device in fp32
    from pcache.engine.models.layers import RotaryEmbedding

    model.rotary = RotaryEmbedding(
        config.head_dim, max_positions, config.rope_theta, config.rope_scaling
    ).to(device)
    if config.tie_word_embeddings:
        model.lm_head.weight = model.model.embed_tokens.weight
    return model.to(dtype).requires_grad_(False)


def random_init(model: CausalLM, seed: int) -> None:
    """Seeded normal(0, 0.02) matrices, unit norms, zero biases."""
    generator = torch.Generator(device=next(model.parameters()).device).manual_seed(seed)
    for name, parameter in model.named_parameters():
        if name.endswith("norm.weight"):
            parameter.fill_(1.0)
        elif name.endswith(".bias"):
            parameter.zero_()
        else:
            parameter.normal_(0.0, 0.02, generator=generator)


def load_checkpoint(model: CausalLM, directory: Path) -> None:
    """Copy safetensors weights (sharded or not) straight into the packed parameters."""
    from safetensors import safe_open

    files = sorted(directory.glob("*.safetensors"))
    if not files:
        raise EngineError(f"{directory}: no *.safetensors weight files")
    parameters = dict(model.named_parameters(remove_duplicate=False))
    expected = {(name, shard) for name, shard in _expected_shards(model)}
    loaded: set[tuple[str, int]] = set()
    for path in files:
        try:
            with safe_open(str(path), framework="pt", device="cpu") as handle:
                for checkpoint_name in handle.keys():  # noqa: SIM118
                    if checkpoint_name.endswith(IGNORED_SUFFIXES) or (
                        checkpoint_name == "lm_head.weight" and model.config.tie_word_embeddings
                    ):
                        continue
                    target = _target(model, checkpoint_name)
                    if target is None or target[0] not in parameters:
                        raise EngineError(f"{path}: unexpected weight {checkpoint_name!r}")
                    name, shard = target
                    tensor = handle.get_tensor(checkpoint_name)
                    _copy_shard(
                        model, parameters[name], name, shard, tensor, f"{path}: {checkpoint_name}"
                    )
                    loaded.add((name, shard))
        except EngineError:
            raise
        except Exception as failure:  # safetensors raises its own error types
            raise EngineError(f"{path}: cannot read weights ({failure})") from None
    missing = sorted(f"{name}[{shard}]" for name, shard in expected - loaded)
    if missing:
        more = f" and {len(missing) - 3} more" if len(missing) > 3 else ""
        raise EngineError(f"{directory}: missing weights {', '.join(missing[:3])}{more}")


def checkpoint_tensors(model: CausalLM) -> dict[str, torch.Tensor]:
    """The model's weights under Hugging Face's names, packed ones split back into their
    shards: what `load_checkpoint` reads (the inverse of its packing)."""
    unpacked: dict[str, list[tuple[int, str]]] = {
        packed: [] for packed, _ in PACKED_MODULES.values()
    }
    for short, (packed, shard) in PACKED_MODULES.items():
        unpacked[packed].append((shard, short))
    tensors = {}
    for name, parameter in model.named_parameters():
        packed = next((p for p in unpacked if f".{p}." in name), None)
        if packed is None:
            tensors[name] = parameter.detach().clone()
            continue
        pieces = parameter.detach().split(_shard_sizes(model, name, parameter))
        for shard, short in unpacked[packed]:
            tensors[name.replace(f".{packed}.", f".{short}.")] = pieces[shard].clone()
    return tensors


def _expected_shards(model: CausalLM):
    for name, parameter in model.named_parameters():
        if name == "lm_head.weight" and model.config.tie_word_embeddings:
            continue
        for shard in range(len(_shard_sizes(model, name, parameter))):
            yield name, shard


def _target(model: CausalLM, checkpoint_name: str) -> tuple[str, int] | None:
    for short, (packed, shard) in PACKED_MODULES.items():
        if f".{short}." in checkpoint_name:
            return checkpoint_name.replace(f".{short}.", f".{packed}."), shard
    return checkpoint_name, 0


def _shard_sizes(model: CausalLM, name: str, parameter) -> list[int]:
    config = model.config
    if ".qkv_proj." in name:
        return [config.q_size, config.kv_size, config.kv_size]
    if ".gate_up_proj." in name:
        return [config.intermediate_size, config.intermediate_size]
    return [parameter.shape[0]]


def _copy_shard(model, parameter, name, shard, tensor, where: str) -> None:
    sizes = _shard_sizes(model, name, parameter)
    offset = sum(sizes[:shard])
    target = parameter.data.narrow(0, offset, sizes[shard]) if len(sizes) > 1 else parameter.data
    if tuple(tensor.shape) != tuple(target.shape):
        raise EngineError(
            f"{where} has shape {tuple(tensor.shape)}, the config says {tuple(target.shape)}"
        )
    target.copy_(tensor)
