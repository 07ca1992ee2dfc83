"""One paged-attention kernel for prefill, extend (cached prefix) and decode.

Each program takes BLOCK_Q query tokens of one sequence and all query heads that share one KV
head (GQA packing): its BLOCK_M = BLOCK_Q x GROUP rows read every K/V tile once. Keys are
walked in tiles of TILE_N positions, decoupled from the cache's block size: each key position
finds its physical block through the block table. Softmax is online, accumulation is fp32,
and a query at position p sees keys 0..p only (positions p = context_len + token index).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl


@triton.jit
def paged_attention_kernel(
    out_ptr,
    query_ptr,
    k_cache_ptr,
    v_cache_ptr,
    cu_seqlens_q_ptr,
    seq_lens_ptr,
    block_table_ptr,
    scale,
    query_stride_token,
    query_stride_head,
    out_stride_token,
    out_stride_head,
    cache_stride_block,
    cache_stride_slot,
    cache_stride_head,
    block_table_stride,
    GROUP: tl.constexpr,
    GROUP_PADDED: tl.constexpr,
    BLOCK_Q: tl.constexpr,
    BLOCK_M: tl.constexpr,
    TILE_N: tl.constexpr,
    HEAD_DIM: tl.constexpr,
    HEAD_DIM_PADDED: tl.constexpr,
    BLOCK_SIZE: tl.constexpr,
    PRECISION: tl.constexpr,
):
    sequence = tl.program_id(0)
    query_block = tl.program_id(1)
    kv_head = tl.program_id(2)
    query_start = tl.load(cu_seqlens_q_ptr + sequence)
    query_len = tl.load(cu_seqlens_q_ptr + sequence + 1) - query_start
    if query_block * BLOCK_Q >= query_len:
        return
    seq_len = tl.load(seq_lens_ptr + sequence)
    context_len = seq_len - query_len

    rows = tl.arange(0, BLOCK_M)
    token = query_block * BLOCK_Q + rows // GROUP_PADDED
    head = kv_head * GROUP + rows % GROUP_PADDED
    row_valid = (token < query_len) & (rows % GROUP_PADDED < GROUP)
    dims = tl.arange(0, HEAD_DIM_PADDED)
    dim_valid = dims < HEAD_DIM
    query_offsets = (query_start + token)[:, None] * query_stride_token
    query_offsets += head[:, None] * query_stride_head + dims[None, :]
    io_mask = row_valid[:, None] & dim_valid[None, :]
    query = tl.load(query_ptr + query_offsets, mask=io_mask, other=0.0)
    position = context_len + token

    row_max = tl.full([BLOCK_M], -1.0e30, dtype=tl.float32)
    row_sum = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM_PADDED], dtype=tl.float32)
    last_token = tl.minimum((query_block + 1) * BLOCK_Q, query_len)
    kv_end = context_len + last_token
    for tile_start in range(0, kv_end, TILE_N):
        keys = tile_start + tl.arange(0, TILE_N)
        key_valid = keys < kv_end
        physical = tl.load(
            block_table_ptr + sequence * block_table_stride + keys // BLOCK_SIZE,
            mask=key_valid,
            other=0,
        )
        cache_offsets = physical.to(tl.int64)[:, None] * cache_stride_block
        cache_offsets += (keys % BLOCK_SIZE)[:, None] * cache_stride_slot
        cache_offsets += kv_head * cache_stride_head + dims[None, :]
        kv_mask = key_valid[:, None] & dim_valid[None, :]
        key = tl.load(k_cache_ptr + cache_offsets, mask=kv_mask, other=0.0)
        value = tl.load(v_cache_ptr + cache_offsets, mask=kv_mask, other=0.0)

        scores = tl.dot(query, tl.trans(key), input_precision=PRECISION) * scale
        visible = (keys[None, :] <= position[:, None]) & key_valid[None, :]
        scores = tl.where(visible, scores, float("-inf"))
        new_max = tl.maximum(row_max, tl.max(scores, axis=1))
        probabilities = tl.exp(scores - new_max[:, None])
        correction = tl.exp(row_max - new_max)
        row_sum = row_sum * correction + tl.sum(probabilities, axis=1)
        acc = acc * correction[:, None]
        acc += tl.dot(probabilities.to(value.dtype), value, input_precision=PRECISION)
        row_max = new_max

    row_sum = tl.where(row_sum > 0, row_sum, 1.0)
    out = acc / row_sum[:, None]
    out_offsets = (query_start + token)[:, None] * out_stride_token
    out_offsets += head[:, None] * out_stride_head + dims[None, :]
    tl.store(out_ptr + out_offsets, out.to(out_ptr.dtype.element_ty), mask=io_mask)


def paged_attention(
    query: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    cu_seqlens_q: torch.Tensor,
    seq_lens: torch.Tensor,
    block_table: torch.Tensor,
    max_seqlen_q: int,
    scale: float,
    block_m: int | None = None,
    tile_n: int | None = None,
    num_warps: int | None = None,
    num_stages: int | None = None,
) -> torch.Tensor:
    """query [tokens, heads, head_dim] over caches [blocks, block_size, kv_heads, head_dim]."""
    _, num_heads, head_dim = query.shape
    _, block_size, num_kv_heads, cache_head_dim = k_cache.shape
    assert cache_head_dim == head_dim and v_cache.shape == k_cache.shape
    assert num_heads % num_kv_heads == 0
    assert query.dtype == k_cache.dtype == v_cache.dtype
    assert query.dtype in (torch.float32, torch.float16, torch.bfloat16)
    assert query.stride(2) == 1 and k_cache.is_contiguous() and v_cache.is_contiguous()
    assert block_size & (block_size - 1) == 0, "block size must be a power of two"
    assert cu_seqlens_q.dtype == seq_lens.dtype == block_table.dtype == torch.int32
    num_sequences = seq_lens.shape[0]
    assert cu_seqlens_q.shape == (num_sequences + 1,) and block_table.shape[0] == num_sequences
    group = num_heads // num_kv_heads
    group_padded = triton.next_power_of_2(group)
    if block_m is None:
        block_m = 16 if max_seqlen_q == 1 else 64
    block_m = max(block_m, group_padded)
    block_q = block_m // group_padded
    if tile_n is None:
        tile_n = 64 if max_seqlen_q > 1 else 32
    launch = {}
    if num_warps is not None:
        launch["num_warps"] = num_warps
    if num_stages is not None:
        launch["num_stages"] = num_stages
    out = torch.empty_like(query)
    grid = (num_sequences, triton.cdiv(max_seqlen_q, block_q), num_kv_heads)
    paged_attention_kernel[grid](
        out,
        query,
        k_cache,
        v_cache,
        cu_seqlens_q,
        seq_lens,
        block_table,
        scale,
        query.stride(0),
        query.stride(1),
        out.stride(0),
        out.stride(1),
        k_cache.stride(0),
        k_cache.stride(1),
        k_cache.stride(2),
        block_table.stride(0),
        GROUP=group,
        GROUP_PADDED=group_padded,
        BLOCK_Q=block_q,
        BLOCK_M=block_m,
        TILE_N=tile_n,
        HEAD_DIM=head_dim,
        HEAD_DIM_PADDED=max(triton.next_power_of_2(head_dim), 16),
        BLOCK_SIZE=block_size,
        PRECISION="ieee" if query.dtype == torch.float32 else "tf32",
        **launch,
    )
    return out
