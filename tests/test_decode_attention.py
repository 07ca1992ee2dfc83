"""The torch backend's batched decode attention: keys gathered by slot, past-the-end keys from
the null block's slot, the same output as attending each sequence over its own pages."""

from __future__ import annotations

import math

import pytest

torch = pytest.importorskip("torch")

from pcache.engine.allocator import keep_freed_memory  # noqa: E402
from pcache.kernels import reference  # noqa: E402

BLOCK_SIZE = 4


def test_key_slots_follow_the_block_table_and_point_past_the_end_at_slot_zero():
    block_table = torch.tensor([[3, 5, 0], [1, 2, 4]])
    seq_lens = torch.tensor([6, 11])
    mask = reference.decode_key_mask(seq_lens, 3 * BLOCK_SIZE)
    slots = reference.decode_key_slots(block_table, mask, BLOCK_SIZE)
    assert slots[0].tolist() == [12, 13, 14, 15, 20, 21] + [0] * 6
    assert slots[1].tolist() == [4, 5, 6, 7, 8, 9, 10, 11, 16, 17, 18, 0]


def test_decode_attention_equals_per_sequence_attention_whatever_stale_slots_hold():
    generator = torch.Generator().manual_seed(0)
    num_blocks, kv_heads, heads, head_dim = 8, 2, 4, 8
    shape = (num_blocks, BLOCK_SIZE, kv_heads, head_dim)
    k_cache = torch.randn(shape, generator=generator)
    v_cache = torch.randn(shape, generator=generator)
    k_cache[0] = v_cache[0] = math.nan  # the null block: never written, whatever it holds
    k_cache[5, 2:] = v_cache[5, 2:] = math.nan  # stale slots past sequence 0's end
    block_table = torch.tensor([[3, 5, 0], [1, 2, 4]])
    seq_lens = torch.tensor([6, 11])
    query = torch.randn(2, heads, head_dim, generator=generator)
    mask = reference.decode_key_mask(seq_lens, 3 * BLOCK_SIZE)
    slots = reference.decode_key_slots(block_table, mask, BLOCK_SIZE)
    batched = reference.decode_attention(query, k_cache, v_cache, slots, mask, 0.5)
    alone = reference.paged_attention_reference(
        query, k_cache, v_cache, [1, 1], seq_lens.tolist(), block_table, 0.5
    )
    assert bool(torch.isfinite(batched).all())
    torch.testing.assert_close(batched, alone)


def test_glibc_keeps_freed_memory_once_set():
    import platform
    import sys

    glibc = sys.platform.startswith("linux") and platform.libc_ver()[0] == "glibc"
    assert keep_freed_memory() is glibc
    assert keep_freed_memory() is glibc  # set once, the answer remembered
