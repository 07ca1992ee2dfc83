"""KV-store kernel: copy each new token's K and V into its slot of the paged cache."""

from __future__ import annotations

import torch
import triton
import triton.language as tl


@triton.jit
def store_kv_kernel(
    key_ptr,
    value_ptr,
    k_cache_ptr,
    v_cache_ptr,
    slot_mapping_ptr,
    key_stride,
    value_stride,
    WIDTH: tl.constexpr,
    WIDTH_PADDED: tl.constexpr,
):
    token = tl.program_id(0)
    slot = tl.load(slot_mapping_ptr + token)
    if slot < 0:
        return
    offsets = tl.arange(0, WIDTH_PADDED)
    mask = offsets < WIDTH
    key = tl.load(key_ptr + token * key_stride + offsets, mask=mask)
    value = tl.load(value_ptr + token * value_stride + offsets, mask=mask)
    tl.store(k_cache_ptr + slot * WIDTH + offsets, key, mask=mask)
    tl.store(v_cache_ptr + slot * WIDTH + offsets, value, mask=mask)


def store_kv(
    key: torch.Tensor,
    value: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    slot_mapping: torch.Tensor,
) -> None:
    """key/value [tokens, kv_heads, head_dim] -> caches [blocks, block_size, kv_heads, head_dim]."""
    num_tokens, num_kv_heads, head_dim = key.shape
    assert value.shape == key.shape and slot_mapping.shape == (num_tokens,)
    assert k_cache.shape == v_cache.shape and k_cache.shape[2:] == (num_kv_heads, head_dim)
    assert key.dtype == value.dtype == k_cache.dtype == v_cache.dtype
    assert k_cache.is_contiguous() and v_cache.is_contiguous()
    for tensor in (key, value):
        assert tensor.stride(2) == 1 and tensor.stride(1) == head_dim, "rows must be contiguous"
    width = num_kv_heads * head_dim
    store_kv_kernel[(num_tokens,)](
        key,
        value,
        k_cache,
        v_cache,
        slot_mapping,
        key.stride(0),
        value.stride(0),
        WIDTH=width,
        WIDTH_PADDED=triton.next_power_of_2(width),
    )
