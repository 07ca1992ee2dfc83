"""The per-step attention metadata every attention layer reads (set once per forward pass)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(slots=True)
class AttentionMetadata:
    """Where each sequence's new tokens sit in the batch and where its KV lives.

    Sequence i has query tokens `cu_seqlens_q[i]:cu_seqlens_q[i+1]` at positions
    `seq_lens[i] - query_len .. seq_lens[i] - 1`; its keys are positions `0 .. seq_lens[i] - 1`,
    read through `block_table[i]`. `slot_mapping[t]` is the KV slot token t is written to.
    """

    cu_seqlens_q: Any
    seq_lens: Any
    block_table: Any
    slot_mapping: Any
    max_seqlen_q: int
    max_seqlen_k: int
    query_lens_list: list[int]
    seq_lens_list: list[int]
    backend: Any = None
    key_mask: Any = None
    """The torch backend's decode mask, built by the first layer and read by the others."""
    key_slots: Any = None
    """The torch backend's decode key slots (`decode_key_slots`), built with `key_mask`."""
    causal_masks: dict = field(default_factory=dict)
    """The torch backend's prefill masks by (query length, keys), built by the first layer
    that needs each (`paged_attention_reference`'s `masks`)."""
    outputs: AttentionMetadata | None = None
    """The step's output rows (the last row of each sequence that samples) as a decode step,
    one query per sequence over all its keys; set where some rows do not sample. The last
    layer stores every row's K/V but attends only for these (`Attention.forward_outputs`);
    None where no row samples (the last layer then only stores K/V)."""

    @property
    def is_decode(self) -> bool:
        """True when every sequence computes exactly one new token (a pure decode step)."""
        return self.max_seqlen_q == 1

    @property
    def has_cached_prefix(self) -> bool:
        """True when some sequence reads keys that earlier steps wrote (cached or decoded)."""
        return self.query_lens_list != self.seq_lens_list


_CONTEXT: AttentionMetadata | None = None


def set_context(metadata: AttentionMetadata) -> None:
    global _CONTEXT
    _CONTEXT = metadata


def get_context() -> AttentionMetadata:
    assert _CONTEXT is not None, "attention called outside a forward pass"
    return _CONTEXT


def reset_context() -> None:
    global _CONTEXT
    _CONTEXT = None
