"""Plain-torch twins of the Triton kernels: the CPU path of the engine and the tests' oracle."""

from __future__ import annotations

import torch
from torch.nn import functional as F


def store_kv_reference(
    key: torch.Tensor,
    value: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    slot_mapping: torch.Tensor,
) -> None:
    """Write key/value [tokens, kv_heads, head_dim] to their slots; slot -1 is skipped."""
    assert key.shape == value.shape and key.shape[1:] == k_cache.shape[2:]
    keep = slot_mapping >= 0
    if not bool(keep.all()):
        key, value, slot_mapping = key[keep], value[keep], slot_mapping[keep]
    k_cache.view(-1, *k_cache.shape[2:]).index_copy_(0, slot_mapping, key)
    v_cache.view(-1, *v_cache.shape[2:]).index_copy_(0, slot_mapping, value)


def decode_attention(
    query: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    key_slots: torch.Tensor,
    key_mask: torch.Tensor,
    scale: float,
) -> torch.Tensor:
    """One new query per sequence, every sequence in one SDPA call over its padded keys.

    query [sequences, heads, head_dim]; key_slots [sequences, num_keys], the KV slot of each
    key (`decode_key_slots`: slot 0, the null block's, past a sequence's length); key_mask
    [sequences, 1, 1, num_keys], True on each sequence's real keys (`decode_key_mask`). One
    gather and one fused kernel per layer instead of one each per sequence: a decode step's
    cost stops growing with the batch's Python work.
    """
    num_sequences, num_heads, _ = query.shape
    assert key_slots.shape[0] == num_sequences == key_mask.shape[0]
    # padding keys read the null block's first slot, which no token is written to; zeroed
    # here whatever the cache was filled with, so the masked keys are finite and the mask exact
    k_cache[0, 0].zero_()
    v_cache[0, 0].zero_()
    keys = gather_slots(k_cache, key_slots).transpose(1, 2)
    values = gather_slots(v_cache, key_slots).transpose(1, 2)
    gqa = num_heads != keys.shape[1]
    out = F.scaled_dot_product_attention(
        query.unsqueeze(2), keys, values, attn_mask=key_mask, scale=scale, enable_gqa=gqa
    )
    return out.squeeze(2)


def gather_slots(cache: torch.Tensor, slots: torch.Tensor) -> torch.Tensor:
    """cache [blocks, block_size, kv_heads, head_dim] at `slots` [sequences, num_keys]:
    [sequences, num_keys, kv_heads, head_dim]. `index_select` over the flat slots, the same
    copy as `cache.flatten(0, 1)[slots]` at a sixth of its time on the CPU (190 vs 29 us
    for 4 x 320 keys: advanced indexing goes through a general strided kernel)."""
    flat = cache.flatten(0, 1)
    return torch.index_select(flat, 0, slots.flatten()).view(*slots.shape, *flat.shape[1:])


def decode_key_mask(seq_lens: torch.Tensor, num_keys: int) -> torch.Tensor:
    """[sequences, 1, 1, num_keys]: key j of sequence i is real when j < seq_lens[i]."""
    keys = torch.arange(num_keys, device=seq_lens.device)
    return (keys[None, :] < seq_lens[:, None])[:, None, None, :]


def decode_key_slots(
    block_table: torch.Tensor, key_mask: torch.Tensor, block_size: int
) -> torch.Tensor:
    """[sequences, max_blocks * block_size]: the KV slot of key j of sequence i, where its
    block table puts it; slot 0 (the first of the null block, which no token is ever written
    to, and which `decode_attention` zeroes) where `key_mask` says the key is past the
    sequence's end, so a gather never reads a slot another request left behind."""
    offsets = torch.arange(block_size, device=block_table.device)
    slots = (block_table[:, :, None] * block_size + offsets).flatten(1)
    return slots.masked_fill_(~key_mask.flatten(1), 0)


def gather_pages(cache: torch.Tensor, block_ids: torch.Tensor, seq_len: int) -> torch.Tensor:
    """The first seq_len tokens of a sequence from its pages: [seq_len, kv_heads, head_dim]."""
    return torch.index_select(cache, 0, block_ids).flatten(0, 1)[:seq_len]


def paged_attention_reference(
    query: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    query_lens: list[int],
    seq_lens: list[int],
    block_table: torch.Tensor,
    scale: float,
    masks: dict[tuple[int, int], torch.Tensor] | None = None,
) -> torch.Tensor:
    """Causal attention of each sequence's new queries over its cached + new keys.

    query [tokens, heads, head_dim]; caches [num_blocks, block_size, kv_heads, head_dim];
    block_table [sequences, max_blocks]. Query j of a sequence with q new tokens and s keys
    sits at position s - q + j and sees keys 0 .. s - q + j. `masks`, where given, keeps
    each (q, s)'s mask (`causal_mask`) for the calls after (the other layers of a step).
    """
    block_size = k_cache.shape[1]
    out = torch.empty_like(query)
    start = 0
    for index, (query_len, seq_len) in enumerate(zip(query_lens, seq_lens, strict=True)):
        assert 0 < query_len <= seq_len
        block_ids = block_table[index, : -(-seq_len // block_size)]
        keys = gather_pages(k_cache, block_ids, seq_len)
        values = gather_pages(v_cache, block_ids, seq_len)
        end = start + query_len
        out[start:end] = attend(query[start:end], keys, values, scale, masks)
        start = end
    return out


def varlen_attention(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    query_lens: list[int],
    scale: float,
) -> torch.Tensor:
    """Causal attention of sequences laid end to end with no cached prefix.

    query [tokens, heads, head_dim]; key, value [tokens, kv_heads, head_dim], the same tokens:
    sequence i's keys are exactly its own queries' tokens, so nothing is read from pages.
    """
    assert query.shape[0] == key.shape[0] == value.shape[0] == sum(query_lens)
    if len(query_lens) == 1:
        return attend(query, key, value, scale)
    out = torch.empty_like(query)
    start = 0
    for query_len in query_lens:
        end = start + query_len
        out[start:end] = attend(query[start:end], key[start:end], value[start:end], scale)
        start = end
    return out


def causal_mask(query_len: int, seq_len: int, like: torch.Tensor) -> torch.Tensor:
    """[query_len, seq_len], additive, in `like`'s dtype and device: 0 where query j (at
    position seq_len - query_len + j) sees key i (i <= that position), -inf elsewhere. The
    form SDPA adds to the scores as it is; a boolean mask it converts to this on every call."""
    rows = torch.arange(query_len, device=like.device)[:, None] + (seq_len - query_len)
    hidden = torch.arange(seq_len, device=like.device)[None, :] > rows
    mask = torch.zeros((query_len, seq_len), dtype=like.dtype, device=like.device)
    return mask.masked_fill_(hidden, float("-inf"))


def attend(
    query: torch.Tensor,
    keys: torch.Tensor,
    values: torch.Tensor,
    scale: float,
    masks: dict[tuple[int, int], torch.Tensor] | None = None,
):
    """SDPA of [q, heads, d] over [s, kv_heads, d] with the causal offset s - q; `masks`, where
    given, keeps the offset's `causal_mask` by (q, s) for the calls after."""
    query_len, seq_len = query.shape[0], keys.shape[0]
    # [1, heads, tokens, head_dim]: the layout SDPA's fused CPU and GPU kernels take
    q, k, v = (x.transpose(0, 1).unsqueeze(0) for x in (query, keys, values))
    gqa = q.shape[1] != k.shape[1]
    if query_len == 1 or query_len == seq_len:
        causal = query_len > 1
        out = F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=scale, enable_gqa=gqa)
    else:
        mask = None if masks is None else masks.get((query_len, seq_len))
        if mask is None:
            mask = causal_mask(query_len, seq_len, query)
            if masks is not None:
                masks[query_len, seq_len] = mask
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=scale, enable_gqa=gqa)
    return out.squeeze(0).transpose(0, 1)
