"""The attention layer and its two backends behind one interface (torch, triton)."""

from __future__ import annotations

import torch
from torch import nn

from pcache.engine.context import AttentionMetadata, get_context


class Backend:
    """Store this layer's new K/V in the paged cache, then attend over the cache."""

    name = ""

    def forward(self, query, key, value, k_cache, v_cache, metadata: AttentionMetadata, scale):
        # store first: every query of this step, of any sequence, may read these slots
        self.store(key, value, k_cache, v_cache, metadata)
        return self.attend(query, k_cache, v_cache, metadata, scale)

    def forward_outputs(self, query, key, value, k_cache, v_cache, metadata, scale):
        """Store every new token's K/V, then attend only for `query`, the output rows' queries
        (`metadata.outputs`: one per sampling sequence, over all of its keys)."""
        self.store(key, value, k_cache, v_cache, metadata)
        if query.shape[0] == 0:  # no row of this step samples: nothing reads the output
            return query
        return self.attend(query, k_cache, v_cache, metadata.outputs, scale)

    def store(self, key, value, k_cache, v_cache, metadata: AttentionMetadata) -> None:
        raise NotImplementedError

    def attend(self, query, k_cache, v_cache, metadata: AttentionMetadata, scale: float):
        raise NotImplementedError


class TorchBackend(Backend):
    """Gather the pages and run SDPA: runs everywhere, and is the oracle.

    A step in which no sequence has a cached prefix (every key is one of this step's new
    tokens) attends over the new K/V as computed, contiguous, instead of gathering pages; a
    decode step of several sequences (or the output rows of a step, `forward_outputs`)
    attends in one masked call over their padded pages.
    """

    name = "torch"

    def forward(self, query, key, value, k_cache, v_cache, metadata: AttentionMetadata, scale):
        from pcache.kernels import reference

        if not metadata.has_cached_prefix:
            self.store(key, value, k_cache, v_cache, metadata)
            return reference.varlen_attention(query, key, value, metadata.query_lens_list, scale)
        return super().forward(query, key, value, k_cache, v_cache, metadata, scale)

    def store(self, key, value, k_cache, v_cache, metadata: AttentionMetadata) -> None:
        # the runner maps every new token to a real slot (no -1 padding on this path)
        k_cache.view(-1, *k_cache.shape[2:]).index_copy_(0, metadata.slot_mapping, key)
        v_cache.view(-1, *v_cache.shape[2:]).index_copy_(0, metadata.slot_mapping, value)

    def attend(self, query, k_cache, v_cache, metadata: AttentionMetadata, scale: float):
        from pcache.kernels import reference

        if metadata.is_decode and len(metadata.seq_lens_list) > 1:
            if metadata.key_mask is None:  # once per step, shared by every layer
                block_size = k_cache.shape[1]
                num_keys = metadata.block_table.shape[1] * block_size
                metadata.key_mask = reference.decode_key_mask(metadata.seq_lens, num_keys)
                metadata.key_slots = reference.decode_key_slots(
                    metadata.block_table, metadata.key_mask, block_size
                )
            return reference.decode_attention(
                query, k_cache, v_cache, metadata.key_slots, metadata.key_mask, scale
            )
        return reference.paged_attention_reference(
            query,
            k_cache,
            v_cache,
            metadata.query_lens_list,
            metadata.seq_lens_list,
            metadata.block_table,
            scale,
            masks=metadata.causal_masks,  # once per step, shared by every layer
        )


class TritonBackend(Backend):
    """The KV-store kernel and the unified paged-attention kernel (GPU, or the interpreter)."""

    name = "triton"

    def store(self, key, value, k_cache, v_cache, metadata: AttentionMetadata) -> None:
        from pcache.kernels.store_kv import store_kv

        store_kv(key, value, k_cache, v_cache, metadata.slot_mapping)

    def attend(self, query, k_cache, v_cache, metadata: AttentionMetadata, scale: float):
        from pcache.kernels.paged_attention import paged_attention

        return paged_attention(
            query,
            k_cache,
            v_cache,
            metadata.cu_seqlens_q,
            metadata.seq_lens,
            metadata.block_table,
            metadata.max_seqlen_q,
            scale,
        )


def get_backend(name: str):
    assert name in ("torch", "triton"), name
    return TorchBackend() if name == "torch" else TritonBackend()


class Attention(nn.Module):
    """Writes this layer's new K/V into its paged cache, then attends over the cache."""

    def __init__(self, num_heads: int, num_kv_heads: int, head_dim: int) -> None:
        super().__init__()
        self.num_heads, self.num_kv_heads, self.head_dim = num_heads, num_kv_heads, head_dim
        self.scale = head_dim**-0.5
        self.k_cache = torch.empty(0)
        self.v_cache = torch.empty(0)

    def forward(self, query, key, value) -> torch.Tensor:
        metadata = get_context()
        return metadata.backend.forward(
            query, key, value, self.k_cache, self.v_cache, metadata, self.scale
        )

    def forward_outputs(self, query, key, value) -> torch.Tensor:
        """Every new token's K/V into the cache; attention for the output rows' queries only
        (`query`, in the order of `AttentionMetadata.outputs`)."""
        metadata = get_context()
        outputs = metadata.outputs
        assert query.shape[0] == (0 if outputs is None else len(outputs.seq_lens_list))
        return metadata.backend.forward_outputs(
            query, key, value, self.k_cache, self.v_cache, metadata, self.scale
        )
