"""A free queue whose blocks are built when first needed behaves as one built in full: same
blocks handed out, same order, same counts, under any sequence of operations; and a pool far
bigger than what it serves builds only what it uses."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from pcache.cache.block_pool import BlockPool
from pcache.cache.free_block_queue import FreeKVCacheBlockQueue
from pcache.cache.kv_block import KVCacheBlock
from pcache.replayer.simulate.policies import VllmPolicy
from pcache.traces.record import TraceRecord

OPERATIONS = st.lists(
    st.tuples(
        st.sampled_from(["popleft", "rotate", "remove", "append", "prepend"]),
        st.integers(0, 6),
        st.randoms(use_true_random=False),
    ),
    max_size=40,
)


def ids(blocks) -> list[int]:
    return [block.block_id for block in blocks]


@given(num_blocks=st.integers(1, 24), num_first=st.integers(0, 24), operations=OPERATIONS)
@settings(max_examples=300, deadline=None)
def test_unbuilt_blocks_change_nothing(num_blocks, num_first, operations):
    num_first = min(num_first, num_blocks)
    whole = [KVCacheBlock(block_id) for block_id in range(num_blocks)]
    eager = FreeKVCacheBlockQueue(whole)
    built = [KVCacheBlock(block_id) for block_id in range(num_first)]
    lazy = FreeKVCacheBlockQueue(list(built), num_blocks - num_first, built)
    free = list(range(num_blocks))  # the eager queue's order, by id
    for name, count, rng in operations:
        out = sorted(set(range(num_blocks)) - set(free))
        if name in ("popleft", "rotate"):
            count = min(count, len(free))
            if name == "popleft":
                taken = eager.popleft_n(count), lazy.popleft_n(count)
                free = free[count:]
            else:
                taken = eager.rotate_n(count), lazy.rotate_n(count)
                free = free[count:] + free[:count][::-1]
            assert ids(taken[0]) == ids(taken[1])
        elif name == "remove":  # blocks in the queue that the lazy one has built
            present = [block_id for block_id in free if block_id < len(built)]
            chosen = rng.sample(present, min(count, len(present)))
            assert eager.remove_n([whole[i] for i in chosen]) == len(chosen)
            assert lazy.remove_n([built[i] for i in chosen]) == len(chosen)
            free = [block_id for block_id in free if block_id not in chosen]
        else:  # blocks out of the queue go back, at either end
            chosen = rng.sample(out, min(count, len(out)))
            getattr(eager, f"{name}_n")([whole[i] for i in chosen])
            getattr(lazy, f"{name}_n")([built[i] for i in chosen])
            free = chosen + free if name == "prepend" else free + chosen
        assert eager.num_free_blocks == lazy.num_free_blocks == len(free)
        assert lazy.num_unbuilt == num_blocks - len(built)
        assert ids(built) == list(range(len(built)))
    assert ids(eager.get_all_free_blocks()) == ids(lazy.get_all_free_blocks()) == free
    assert lazy.num_unbuilt == 0 and len(built) == num_blocks


def record(hash_ids: list[int], position: int) -> TraceRecord:
    return TraceRecord(position, None, float(position), 16 * len(hash_ids), hash_ids=hash_ids)


def test_a_big_pool_builds_what_it_serves():
    requests = [record([1, 2, 3], 0), record([1, 2, 4, 5], 1), record([6], 2)]
    big, small = VllmPolicy(10**5, 16, None), VllmPolicy(16, 16, None)
    held = []
    for request in requests:
        admissions = big.admit(request, 0.0), small.admit(request, 0.0)
        assert admissions[0].cached_tokens == admissions[1].cached_tokens
        held.append(admissions)
    for admissions in held:
        big.release(admissions[0])
        small.release(admissions[1])
    assert big.pool.free_block_queue.num_unbuilt == 10**5 + 1 - 1 - 6  # null block + 6 used
    assert big.peak_used_blocks == small.peak_used_blocks == 6
    big.check_integrity()  # builds the rest
    assert big.pool.free_block_queue.num_unbuilt == 0 and len(big.pool.blocks) == 10**5 + 1


def test_a_pool_hands_out_blocks_in_id_order_then_the_freed_ones():
    pool = BlockPool(6)
    first = pool.get_new_blocks(2)
    pool.cache_full_blocks(first, ["a", "b"], 0, 2, 4)
    pool.free_blocks(reversed(first))
    assert ids(pool.get_new_blocks(3)) == [3, 4, 5]
    assert ids(pool.get_new_blocks(2)) == [2, 1]  # the least recently freed first
    pool.check_integrity()
