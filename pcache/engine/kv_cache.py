"""The paged KV cache: per layer a K and a V tensor [num_blocks, block_size, kv_heads, head_dim].

Token at position p of a sequence lives in slot `block_table[p // block_size] * block_size
+ p % block_size`; block 0 is the pool's null block and is never written. Blocks themselves
are handed out by `pcache.cache.kv_cache_manager.KVCacheManager` (the simulator's pool).
"""

from __future__ import annotations

import os

import torch

from pcache.engine.config import EngineConfig
from pcache.engine.model_config import ModelConfig
from pcache.engine.models.onednn_linear import reordered_bytes
from pcache.errors import EngineError

DEFAULT_CPU_KV_CACHE_TOKENS = 8192
KVCache = list[tuple[torch.Tensor, torch.Tensor]]
"""One (K, V) pair of tensors per layer."""
GIB = 1024**3


def dtype_bytes(dtype: torch.dtype) -> int:
    return torch.empty(0, dtype=dtype).element_size()


def available_host_memory() -> int:
    """MemAvailable from /proc/meminfo, else the physical memory size."""
    try:
        with open("/proc/meminfo", encoding="ascii") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def rotary_bytes(max_positions: int, head_dim: int) -> int:
    """Peak bytes of building the rotary cos/sin tables (fp32 [max_positions, head_dim] each,
    plus the half-width angle tables they are made from): at most 4 tables' worth."""
    return 4 * max_positions * head_dim * 4


def plan_num_blocks(
    config: EngineConfig, model: ModelConfig, dtype: torch.dtype, max_positions: int
) -> int:
    """How many KV blocks (null block included) to allocate; too little memory raises.

    Everything allocated is counted before anything is: weights (and the CPU's reordered copy
    of the linear layers'), rotary tables for `max_positions`, activations (GPU) and the KV
    cache itself.
    """
    element = dtype_bytes(dtype)
    block_bytes = model.kv_bytes_per_token(element) * config.block_size
    weight_bytes = model.num_parameters() * element + rotary_bytes(max_positions, model.head_dim)
    if not config.is_cuda and dtype == torch.float32:  # oneDNN's reordered copies
        weight_bytes += reordered_bytes(model.num_linear_weights(), element)
    if config.is_cuda:
        free, total = torch.cuda.mem_get_info(torch.device(config.device))
        budget = int(total * config.gpu_memory_utilization) - (total - free) - weight_bytes
        budget -= activation_bytes(config, model, element)
        where = f"{config.device} ({free / GIB:.1f} GiB free)"
    else:
        budget = int(available_host_memory() * 0.8) - weight_bytes
        where = f"host memory ({available_host_memory() / GIB:.1f} GiB available)"
    if config.num_kv_blocks is not None:
        num_blocks = config.num_kv_blocks
    elif config.kv_cache_tokens is not None or not config.is_cuda:
        tokens = config.kv_cache_tokens or DEFAULT_CPU_KV_CACHE_TOKENS
        num_blocks = -(-tokens // config.block_size) + 1
    else:
        num_blocks = max(budget // block_bytes, 0)
    needed = num_blocks * block_bytes
    if num_blocks < 2 or needed > budget:
        raise EngineError(
            f"too little memory for the KV cache: {num_blocks} blocks of {config.block_size}"
            f" tokens need {needed / GIB:.2f} GiB beside {weight_bytes / GIB:.2f} GiB of"
            f" weights and rotary tables ({max_positions} positions), {where}"
        )
    return num_blocks


def activation_bytes(config: EngineConfig, model: ModelConfig, element: int) -> int:
    tokens = config.max_num_batched_tokens
    width = model.q_size + 2 * model.kv_size + 2 * model.intermediate_size + 4 * model.hidden_size
    return 2 * tokens * width * element + config.max_num_seqs * model.vocab_size * 4


def allocate_kv_cache(
    model: ModelConfig, num_blocks: int, block_size: int, dtype: torch.dtype, device
) -> KVCache:
    """One (K, V) pair per layer, zero-filled (every page touched now, not in a measurement)."""
    shape = (num_blocks, block_size, model.num_kv_heads, model.head_dim)
    return [
        (
            torch.zeros(shape, dtype=dtype, device=device),
            torch.zeros(shape, dtype=dtype, device=device),
        )
        for _ in range(model.num_layers)
    ]
