"""The torch backend's attention of new queries over cached keys: the additive causal mask
kept once per step for every layer, the same output as attention written out query by query."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

torch = pytest.importorskip("torch")

from pcache.kernels import reference  # noqa: E402

BLOCK_SIZE = 4


@settings(max_examples=60, deadline=None)
@given(data=st.data(), seq_len=st.integers(1, 40))
def test_the_causal_mask_hides_exactly_the_keys_after_each_querys_position(data, seq_len):
    query_len = data.draw(st.integers(1, seq_len))
    mask = reference.causal_mask(query_len, seq_len, torch.empty(0, dtype=torch.float32))
    assert mask.shape == (query_len, seq_len) and mask.dtype == torch.float32
    for j in range(query_len):
        position = seq_len - query_len + j
        assert mask[j].tolist() == [0.0 if i <= position else -torch.inf for i in range(seq_len)]


def written_out(query, keys, values, scale):
    """Query j of q over s keys sees keys 0 .. s - q + j: softmax(q.k * scale) @ v in float64."""
    query_len, heads, _ = query.shape
    seq_len, kv_heads, _ = keys.shape
    out = torch.empty(query.shape, dtype=torch.float64)
    for j in range(query_len):
        seen = seq_len - query_len + j + 1
        for head in range(heads):
            kv = head // (heads // kv_heads)
            scores = keys[:seen, kv].double() @ query[j, head].double() * scale
            out[j, head] = torch.softmax(scores, dim=0) @ values[:seen, kv].double()
    return out


@settings(max_examples=25, deadline=None)
@given(
    lengths=st.lists(st.tuples(st.integers(1, 9), st.integers(0, 10)), min_size=1, max_size=4),
    seed=st.integers(0, 2**16),
)
def test_paged_attention_with_kept_masks_equals_attention_written_out(lengths, seed):
    generator = torch.Generator().manual_seed(seed)
    heads, kv_heads, head_dim = 4, 2, 8
    query_lens = [new for new, _ in lengths]
    seq_lens = [new + cached for new, cached in lengths]
    blocks_per_sequence = -(-max(seq_lens) // BLOCK_SIZE)
    num_blocks = 1 + len(lengths) * blocks_per_sequence
    shape = (num_blocks, BLOCK_SIZE, kv_heads, head_dim)
    k_cache = torch.randn(shape, generator=generator)
    v_cache = torch.randn(shape, generator=generator)
    order = torch.randperm(num_blocks - 1, generator=generator) + 1  # pages in any order
    block_table = order.view(len(lengths), blocks_per_sequence)
    query = torch.randn(sum(query_lens), heads, head_dim, generator=generator)
    masks: dict = {}
    for _ in range(2):  # a second layer reads the masks the first one kept
        got = reference.paged_attention_reference(
            query, k_cache, v_cache, query_lens, seq_lens, block_table, 0.5, masks=masks
        )
        start = 0
        for index, (query_len, seq_len) in enumerate(zip(query_lens, seq_lens, strict=True)):
            pages = block_table[index, : -(-seq_len // BLOCK_SIZE)]
            keys = reference.gather_pages(k_cache, pages, seq_len)
            values = reference.gather_pages(v_cache, pages, seq_len)
            expected = written_out(query[start : start + query_len], keys, values, 0.5)
            torch.testing.assert_close(
                got[start : start + query_len].double(), expected, rtol=1e-5, atol=1e-5
            )
            start += query_len
    kept = {(q, s) for q, s in zip(query_lens, seq_lens, strict=True) if 1 < q < s}
    assert set(masks) == kept
