"""vLLM 0.33 prefix-caching conformance: scenarios S1-S18 and U2-U18 with vLLM's numbers."""

from __future__ import annotations

import pytest

from pcache.cache.block_pool import (
    BlockHashToBlockMap,
    BlockPool,
    FreeKVCacheBlockQueue,
    KVCacheBlock,
)
from pcache.cache.hashing import HashSettings, block_hashes, vllm_hash, vllm_none_hash
from pcache.cache.kv_cache_manager import KVCacheManager
from pcache.cache.request import CacheRequest

C3 = [0] * 16 + [1] * 16 + [2] * 16


def make_request(request_id, tokens, algo="sha256", block_size=16, **kwargs):
    return CacheRequest.from_tokens(
        str(request_id), tokens, HashSettings(algo=algo, block_size=block_size), **kwargs
    )


def manager(block_size=16, num_blocks=11, **kwargs):
    return KVCacheManager(num_blocks, block_size, **kwargs)


def ids(blocks):
    return [block.block_id for block in blocks]


def free_order(m):
    return ids(m.block_pool.free_block_queue.get_all_free_blocks())


def admit(m, request):
    """Lookup then allocate the rest of the prompt, as the scheduler does."""
    hits, num_hits = m.get_computed_blocks(request)
    new = m.allocate_slots(request, request.num_tokens - num_hits, num_hits, hits)
    return hits, num_hits, new


@pytest.mark.parametrize("algo", ["sha256", "sha256_cbor"])
def test_s1_prefill(algo):
    m = manager()
    r0 = make_request(0, [*C3, *[3] * 7], algo)
    assert len(r0.block_hashes) == 3
    hits, num_hits, new = admit(m, r0)
    assert (ids(hits), num_hits, ids(new)) == ([], 0, [1, 2, 3, 4])
    parent = vllm_none_hash(algo)
    for index, block in enumerate(m.req_to_blocks["0"][:3]):
        expected = vllm_hash(algo, (parent, tuple(C3[index * 16 : (index + 1) * 16]), None))
        assert block.block_hash == expected and block.ref_cnt == 1
        parent = expected
    assert m.req_to_blocks["0"][3].block_hash is None
    r1 = make_request(1, [*C3, *[3] * 5], algo)
    hits, num_hits, new = admit(m, r1)
    assert (ids(hits), num_hits, ids(new)) == ([1, 2, 3], 48, [5])
    assert [b.ref_cnt for b in hits] == [2, 2, 2]
    assert m.block_pool.get_num_free_blocks() == 5
    m.free(r0)
    m.free(r1)
    assert m.block_pool.get_num_free_blocks() == 10
    assert free_order(m) == [5, 4, 6, 7, 8, 9, 10, 3, 2, 1]
    r2 = make_request(2, [*C3, *[3] * 6], algo)
    hits, num_hits, new = admit(m, r2)
    assert (ids(hits), num_hits, ids(new)) == ([1, 2, 3], 48, [5])
    assert m.block_pool.get_num_free_blocks() == 6
    assert all(b.ref_cnt == 0 for b in m.block_pool.free_block_queue.get_all_free_blocks())
    m.free(r2)
    r3 = make_request(3, [99] * 160, algo)
    hits, num_hits, new = admit(m, r3)
    assert (num_hits, ids(new)) == (0, [5, 4, 6, 7, 8, 9, 10, 3, 2, 1])
    queue = m.block_pool.free_block_queue
    assert m.block_pool.get_num_free_blocks() == 0
    assert queue.fake_head.next_free_block is queue.fake_tail
    m.check_integrity()


def test_s2_prompt_logprobs_write_but_never_read():
    m = manager()
    r0 = make_request(0, [*C3, *[3] * 7], skip_reading_prefix_cache=True)
    assert m.get_computed_blocks(r0) == ([], 0)
    assert ids(m.allocate_slots(r0, 55)) == [1, 2, 3, 4]
    assert all(b.block_hash is not None for b in m.req_to_blocks["0"][:3])
    r1 = make_request(1, [*C3, *[3] * 5])
    hits, _num_hits, new = admit(m, r1)
    assert (ids(hits), ids(new)) == ([1, 2, 3], [5])
    assert [b.ref_cnt for b in hits] == [2, 2, 2]
    m.free(r0)
    m.free(r1)
    assert free_order(m) == [5, 4, 6, 7, 8, 9, 10, 3, 2, 1]
    r2 = make_request(2, [*C3, *[3] * 6], skip_reading_prefix_cache=True)
    assert m.get_computed_blocks(r2) == ([], 0)
    new = m.allocate_slots(r2, 55)
    assert ids(new) == [5, 4, 6, 7]
    assert [b.block_hash for b in new] == [*r0.block_hashes, None]
    assert all(b.ref_cnt == 1 for b in new)
    for block_hash in r0.block_hashes:
        holders = dict(m.block_pool.cached_block_hash_to_block.items())[block_hash]
        assert len(holders) == 2
    m.check_integrity()


def test_s3_decode_caches_blocks_as_they_fill():
    m = manager()
    r0 = make_request(0, [*C3, *[3] * 7])
    assert ids(admit(m, r0)[2]) == [1, 2, 3, 4]
    r0.num_computed_tokens = 55
    r0.append_output_token_ids([8] * 4)
    assert m.allocate_slots(r0, 4) == []
    assert m.req_to_blocks["0"][-1].block_hash is None
    r0.num_computed_tokens = 59
    r0.append_output_token_ids([7] * 19)
    assert r0.num_tokens == 78
    assert len(m.allocate_slots(r0, 19)) == 1
    assert m.req_to_blocks["0"][-2].block_hash is not None
    assert m.req_to_blocks["0"][-1].block_hash is None
    m.check_integrity()


def test_s4_evict_order():
    m = manager()
    r0 = make_request(0, list(range(87)))
    assert ids(admit(m, r0)[2]) == [1, 2, 3, 4, 5, 6]
    r1 = make_request(1, list(range(87, 135)))
    assert ids(admit(m, r1)[2]) == [7, 8, 9]
    assert m.block_pool.get_num_free_blocks() == 1
    m.free(r0)
    assert free_order(m) == [6, 10, 5, 4, 3, 2, 1]
    m.free(r1)
    assert free_order(m) == [6, 10, 5, 4, 3, 2, 1, 9, 8, 7]
    r2 = make_request(2, list(range(35)))
    hits, num_hits, new = admit(m, r2)
    assert (ids(hits), num_hits, ids(new)) == ([1, 2], 32, [6])
    assert m.block_pool.get_num_free_blocks() == 7
    m.check_integrity()


def test_s5_hash_cleared_on_reuse():
    m = manager(num_blocks=2)
    r0 = make_request(0, list(range(16)))
    admit(m, r0)
    m.free(r0)
    r1 = make_request(1, list(range(15)))
    _hits, num_hits, new = admit(m, r1)
    assert num_hits == 0 and len(new) == 1 and new[0].block_hash is None
    m.check_integrity()


def test_s6_computed_blocks_not_evicted():
    m = manager(num_blocks=3)
    r0, r1 = make_request(0, list(range(16))), make_request(1, list(range(16, 32)))
    assert ids(admit(m, r0)[2]) == [1]
    assert ids(admit(m, r1)[2]) == [2]
    m.free(r0)
    m.free(r1)
    r2 = make_request(2, list(range(32)))
    hits, num_hits = m.get_computed_blocks(r2)
    assert (ids(hits), num_hits) == ([1], 16)
    assert ids(m.allocate_slots(r2, 16, 16, hits)) == [2]
    m.check_integrity()


def test_s7_caching_disabled():
    m = manager(block_size=4, num_blocks=5, enable_caching=False)
    r1 = make_request(1, list(range(10)), block_size=4)
    assert m.get_computed_blocks(r1) == ([], 0)
    assert len(m.allocate_slots(r1, 10)) == 3
    m.free(r1)
    r2 = make_request(2, list(range(16)), block_size=4)
    assert m.get_computed_blocks(r2) == ([], 0)
    assert len(m.allocate_slots(r2, 16)) == 4
    r3 = make_request(3, list(range(4)), block_size=4)
    assert m.allocate_slots(r3, 4) is None
    m.check_integrity()


@pytest.mark.parametrize("algo", ["sha256", "sha256_cbor"])
def test_s8_cache_blocks(algo):
    pool = BlockPool(5)
    request = make_request(0, list(range(14)), algo, block_size=4)
    assert len(request.block_hashes) == 3
    blocks = [KVCacheBlock(i) for i in range(2)]
    pool.cache_full_blocks(blocks, request.block_hashes, 0, 2, 4)
    assert len(pool.cached_block_hash_to_block) == 2
    assert all(b.block_hash is not None for b in blocks)
    blocks.append(KVCacheBlock(2))
    pool.cache_full_blocks(blocks, request.block_hashes, 2, 3, 4)
    assert len(pool.cached_block_hash_to_block) == 3


def test_s9_cache_blocks_multi_group():
    pool = BlockPool(10)
    request = make_request(0, list(range(14)), block_size=4)
    pool.cache_full_blocks(pool.blocks[1:3], request.block_hashes, 0, 2, 4, kv_cache_group_id=0)
    assert len(pool.cached_block_hash_to_block) == 2
    pool.cache_full_blocks(pool.blocks[3:6], request.block_hashes, 0, 3, 4, kv_cache_group_id=1)
    assert len(pool.cached_block_hash_to_block) == 5
    hashes = request.block_hashes
    assert [pool.get_cached_block(h, [0]) is not None for h in hashes] == [True, True, False]
    assert [pool.get_cached_block(h, [1]) is not None for h in hashes] == [True, True, True]
    assert [pool.get_cached_block(h, [0, 1]) is not None for h in hashes] == [True, True, False]


def test_s11_cache_key_salting():
    m = manager()
    r0 = make_request(0, [*C3, *[3] * 11], cache_salt="salt1")
    parent = vllm_none_hash("sha256")
    h0 = vllm_hash("sha256", (parent, tuple(C3[:16]), (("cache_salt", "salt1"),)))
    h1 = vllm_hash("sha256", (h0, tuple(C3[16:32]), None))
    assert r0.block_hashes[:2] == [h0, h1]
    assert ids(admit(m, r0)[2]) == [1, 2, 3, 4]
    r0.num_computed_tokens = 59
    r0.append_output_token_ids([5] * 5)
    assert len(r0.block_hashes) == 4
    r1 = make_request(1, [*C3, *[4] * 11], cache_salt="salt1")
    assert m.get_computed_blocks(r1)[1] == 48
    r2 = make_request(2, [*C3, *[4] * 11], cache_salt="salt2")
    assert m.get_computed_blocks(r2) == ([], 0)
    assert not set(r2.block_hashes) & set(r0.block_hashes)


def test_s12_not_enough_free_blocks_with_computed_blocks():
    m = manager()
    r0 = make_request(0, C3)
    admit(m, r0)
    r1 = make_request(1, C3 * 2)
    hits, num_hits, new = admit(m, r1)
    assert num_hits == 48 and len(new) == 3
    m.free(r1)
    r2 = make_request(2, [7] * 32)
    admit(m, r2)
    assert m.block_pool.get_num_free_blocks() == 5
    r3 = make_request(3, C3 * 3)
    hits, num_hits = m.get_computed_blocks(r3)
    assert num_hits == 96
    assert m.allocate_slots(r3, 48, num_hits, hits) is None
    assert [b.ref_cnt for b in hits] == [1, 1, 1, 0, 0, 0]
    m.check_integrity()


def test_s13_reset_prefix_cache():
    m = manager()
    r0 = make_request(0, [*C3, *[3] * 7])
    assert ids(admit(m, r0)[2]) == [1, 2, 3, 4]
    r1 = make_request(1, [*C3, *[4] * 7])
    hits, _, new = admit(m, r1)
    assert (len(hits), ids(new)) == (3, [5])
    assert m.reset_prefix_cache() is False
    assert len(m.block_pool.cached_block_hash_to_block) > 0
    m.free(r0)
    m.free(r1)
    assert m.reset_prefix_cache() is True
    assert len(m.block_pool.cached_block_hash_to_block) == 0
    assert all(b.block_hash is None for b in m.block_pool.blocks)


def test_s14_stats_disabled():
    m = manager(log_stats=False)
    request = make_request(0, C3)
    admit(m, request)
    m.record_prefix_cache_stats(request, 0)
    m.reset_prefix_cache()
    assert m.prefix_cache_stats is None and m.make_prefix_cache_stats() is None


def test_s15_evict_one_cached_block():
    pool = BlockPool(4)
    keys = ["k0", "k1", "k2", "k0"]
    for block, key in zip(pool.blocks, keys, strict=True):
        block.block_hash = key
        pool.cached_block_hash_to_block.insert(key, block)
    assert {k: ids(v) for k, v in pool.cached_block_hash_to_block.items()} == {
        "k0": [0, 3],
        "k1": [1],
        "k2": [2],
    }
    assert pool.evict([pool.blocks[1]]) == pool.evict([pool.blocks[0]]) == 1
    assert {k: ids(v) for k, v in pool.cached_block_hash_to_block.items()} == {
        "k0": [3],
        "k2": [2],
    }
    assert pool.evict([pool.blocks[2]]) == pool.evict([pool.blocks[3]]) == 1
    assert len(pool.cached_block_hash_to_block) == 0


@pytest.mark.parametrize("k", [2, 3, 10])
def test_s16_kv_cache_events(k):
    m = manager(num_blocks=k + 1, enable_kv_cache_events=True)
    r0 = make_request(0, list(range(16 * k)))
    m.allocate_slots(r0, 16 * k)
    events = m.block_pool.take_events()
    assert events[-1][0] == "BlockStored" and len(events[-1][1]) == k
    assert events[-1][2] == 16 * k and m.block_pool.take_events() == []
    m.free(r0)
    r1 = make_request(1, list(range(16 * k)))
    m.allocate_slots(r1, 16 * k)
    events = m.block_pool.take_events()
    assert len(events) == k + 1
    assert all(e[0] == "BlockRemoved" and e[1] in r0.block_hashes for e in events[:k])
    assert events[k][0] == "BlockStored" and len(events[k][1]) == k
    m.free(r1)
    m.reset_prefix_cache()
    assert m.block_pool.take_events() == [("AllBlocksCleared",)]


def test_s17_block_lookup_map():
    lookup = BlockHashToBlockMap()
    first, second = KVCacheBlock(1), KVCacheBlock(2)
    lookup.insert("k", first)
    assert lookup.pop("k", 9) is None and lookup.get_one_block("k") is first
    assert lookup.pop("k", 1) is first and lookup.get_one_block("k") is None
    lookup.insert("k", first)
    lookup.insert("k", second)
    assert lookup.get_one_block("k") is first
    assert lookup.pop("k", 1) is first
    assert lookup.get_one_block("k") is second


@pytest.mark.parametrize(("length", "expected"), [(48, 32), (37, 32), (49, 48), (55, 48)])
def test_s18_last_token_rule(length, expected):
    m = manager(num_blocks=20)
    first = make_request(0, list(range(length)))
    admit(m, first)
    m.free(first)
    again = make_request(1, list(range(length)))
    assert m.get_computed_blocks(again)[1] == expected


def test_d1_stats_token_based():
    m = manager()
    r0 = make_request(0, [*C3, *[3] * 7])
    _, hits0, _ = admit(m, r0)
    m.record_prefix_cache_stats(r0, hits0)
    r1 = make_request(1, [*C3, *[3] * 5])
    _, hits1, _ = admit(m, r1)
    m.record_prefix_cache_stats(r1, hits1)
    stats = m.make_prefix_cache_stats()
    assert (stats.requests, stats.queries, stats.hits) == (2, 108, 48)
    assert stats.hit_rate == pytest.approx(0.444, abs=1e-3)


# -- U scenarios ---------------------------------------------------------------------------


def test_u2_kv_cache_block():
    block = KVCacheBlock(0)
    assert block.ref_cnt == 0 and block.block_hash is None
    block.block_hash = b"h"
    assert block.block_hash == b"h"
    with pytest.raises(AssertionError):
        block.block_hash = b"again"
    block.reset_hash()
    assert block.block_hash is None


def test_u3_free_queue_operations():
    blocks = [KVCacheBlock(i) for i in range(5)]
    queue = FreeKVCacheBlockQueue(blocks)
    assert queue.popleft() is blocks[0] and queue.num_free_blocks == 4
    queue.remove(blocks[2])
    assert blocks[1].next_free_block is blocks[3]
    queue.append(blocks[2])
    assert queue.fake_tail.prev_free_block is blocks[2]
    for _ in range(4):
        queue.popleft()
    assert queue.num_free_blocks == 0
    assert queue.fake_head.next_free_block is queue.fake_tail
    with pytest.raises(ValueError, match="No free blocks available"):
        queue.popleft()


def test_u4_append_n():
    blocks = [KVCacheBlock(i) for i in range(6)]
    queue = FreeKVCacheBlockQueue([])
    queue.append_n([])
    assert ids(queue.get_all_free_blocks()) == []
    queue.append_n([blocks[0]])
    queue.append_n([blocks[4], blocks[5]])
    assert ids(queue.get_all_free_blocks()) == [0, 4, 5]
    queue.append_n(blocks[1:4])
    assert ids(queue.get_all_free_blocks()) == [0, 4, 5, 1, 2, 3]
    assert queue.num_free_blocks == 6


def test_u5_prepend_n():
    blocks = [KVCacheBlock(i) for i in range(6)]
    queue = FreeKVCacheBlockQueue([blocks[0]])
    queue.prepend_n([])
    queue.prepend_n([blocks[4], blocks[5]])
    assert ids(queue.get_all_free_blocks()) == [4, 5, 0]
    queue.prepend_n([blocks[1], blocks[2]])
    assert ids(queue.get_all_free_blocks()) == [1, 2, 4, 5, 0]
    assert [queue.popleft().block_id for _ in range(5)] == [1, 2, 4, 5, 0]


def test_u6_popleft_n():
    blocks = [KVCacheBlock(i) for i in range(6)]
    queue = FreeKVCacheBlockQueue([blocks[i] for i in (1, 3, 5, 4, 0, 2)])
    assert queue.popleft_n(0) == []
    assert ids(queue.popleft_n(1)) == [1]
    assert ids(queue.popleft_n(2)) == [3, 5]
    popped = queue.popleft_n(3)
    assert ids(popped) == [4, 0, 2]
    assert all(b.prev_free_block is None and b.next_free_block is None for b in popped)


def test_u7_get_all_free_blocks():
    blocks = [KVCacheBlock(i) for i in range(5)]
    queue = FreeKVCacheBlockQueue(blocks)
    assert ids(queue.get_all_free_blocks()) == [0, 1, 2, 3, 4]
    queue.popleft()
    queue.remove(blocks[2])
    queue.append(blocks[0])
    assert ids(queue.get_all_free_blocks()) == [1, 3, 4, 0]


def test_u12_u15_hash_chain():
    settings = HashSettings(algo="sha256", block_size=3)
    h0, h1 = block_hashes(list(range(6)), settings)
    none_hash = vllm_none_hash("sha256")
    assert h0 == vllm_hash("sha256", (none_hash, (0, 1, 2), None))
    assert h1 == vllm_hash("sha256", (h0, (3, 4, 5), None))


@pytest.mark.parametrize(("lookahead", "expected"), [(2, 2), (4, 2)])
def test_u18_allocate_with_lookahead(lookahead, expected):
    m = manager(block_size=4, num_blocks=10)
    request = make_request(0, [], block_size=4)
    blocks = m.allocate_slots(request, 3, num_lookahead_tokens=lookahead)
    assert len(blocks) == expected


def test_ttft_model_seed_arithmetic():
    """N = 4,096 with 3,072 cached: 3,670,528 of 8,390,656 query-key pairs remain."""
    from pcache.replayer.ttft import TtftModel, attention_pairs

    assert attention_pairs(4096, 0) == 8_390_656
    assert attention_pairs(4096, 3072) == 3_670_528
    model = TtftModel(overhead_ms=55.0, ms_per_token=0.05, ms_per_pair=0.0)
    assert model.predict(4000, 0) / model.predict(4000, 3072) == pytest.approx(2.515, abs=1e-3)
