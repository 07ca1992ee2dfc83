"""The KV block pool with vLLM 0.33 prefix-caching semantics (one full-attention group).

Used by both drivers: the simulator (`pcache replay --simulate`) and the engine's paged KV
cache. Its parts, one module each: `KVCacheBlock` (`kv_block`), `FreeKVCacheBlockQueue`
(`free_block_queue`), `BlockHashToBlockMap` (`block_hash_map`) and the serial replay's fast
path (`serial_replay`). Public API (stable):

- `BlockPool(num_blocks, enable_caching=True)`: block 0 is the null block (never cached,
  never freed), so the usable capacity is `num_blocks - 1`. A block is built when the free
  queue first hands it out (`blocks` builds the rest), so a pool far bigger than what it
  serves costs what it uses. `get_new_blocks(n)` pops from the
  head of the free queue and drops the popped block's hash entry (lazy eviction);
  `touch(blocks)` takes hit blocks out of the free queue and adds a reference;
  `free_blocks(blocks)` (pass them tail first) returns unhashed blocks to the head and hashed
  ones to the tail; `cache_full_blocks(...)` publishes hashes at scheduling time;
  `replay_request(hashes, block_size)` serves and releases one request of a serial replay;
  `get_cached_block(hash)`, `reset_prefix_cache()`, `get_num_free_blocks()`, `get_usage()`,
  `check_integrity()`, `is_idle()`.
- The steps the general operations and the fast path share: `take_free_blocks(blocks, keys)`
  (blocks just out of the free queue: the high-water mark, their old hashes evicted, new ones
  given) and `rekey(blocks, keys)`, the one place blocks are evicted and cached.

Block hashes are any hashable value: the chained `bytes` of `pcache.cache.hashing`, or the
integer ids of hash-id traces. Identical blocks are not de-duplicated: two blocks may hold the
same hash, and lookups return the first inserted.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from itertools import repeat

from pcache.cache import serial_replay
from pcache.cache.block_hash_map import BlockHashToBlockMap, group_key
from pcache.cache.free_block_queue import FreeKVCacheBlockQueue
from pcache.cache.kv_block import BlockHash, KVCacheBlock

# The two checks below are loops, not any()/all() over a generator: on the replay's hot path
# a loop runs in half the time.


def _unhashed(blocks: Iterable[KVCacheBlock]) -> bool:
    """No block holds a hash."""
    for block in blocks:  # noqa: SIM110
        if block._block_hash is not None:
            return False
    return True


def _holds_null(blocks: Iterable[KVCacheBlock]) -> bool:
    """Some block is the null block."""
    for block in blocks:  # noqa: SIM110
        if block.is_null:
            return True
    return False


__all__ = [
    "BlockHash",
    "BlockHashToBlockMap",
    "BlockPool",
    "FreeKVCacheBlockQueue",
    "KVCacheBlock",
    "group_key",
]


class BlockPool:
    """All KV blocks, the free queue and the hash map; block 0 is the null block."""

    def __init__(
        self, num_blocks: int, enable_caching: bool = True, enable_kv_cache_events: bool = False
    ):
        assert num_blocks >= 1, "a pool needs at least the null block"
        self.num_gpu_blocks = num_blocks
        self.enable_caching = enable_caching
        self._blocks: list[KVCacheBlock] = []  # built so far, in id order
        self.free_block_queue = FreeKVCacheBlockQueue((), num_blocks, self._blocks)
        self.cached_block_hash_to_block = BlockHashToBlockMap()
        self.null_block = self.free_block_queue.popleft()
        self.null_block.is_null = True
        self.num_evicted_blocks = 0
        # blocks leave the free queue in id order the first time, so this is also the number
        # of blocks that ever held KV (the pool's high-water mark)
        self.max_block_id_used = 0
        self.enable_kv_cache_events = enable_kv_cache_events
        self.kv_event_queue: list[tuple] = []

    @property
    def blocks(self) -> list[KVCacheBlock]:
        """Every block, by id (those the pool has not used yet are built now)."""
        self.free_block_queue.build()
        return self._blocks

    # -- lookup -------------------------------------------------------------------------------

    def get_cached_block(
        self, block_hash: BlockHash, kv_cache_group_ids: Sequence[int] = (0,)
    ) -> list[KVCacheBlock] | None:
        """One cached block per group for `block_hash`, or None unless every group hits."""
        found = []
        for group_id in kv_cache_group_ids:
            block = self.cached_block_hash_to_block.get_one_block(group_key(block_hash, group_id))
            if block is None:
                return None
            found.append(block)
        return found

    # -- caching ------------------------------------------------------------------------------

    def cache_full_blocks(
        self,
        blocks: Sequence[KVCacheBlock],
        block_hashes: Sequence[BlockHash],
        num_cached_blocks: int,
        num_full_blocks: int,
        block_size: int,
        kv_cache_group_id: int = 0,
        token_ids: Sequence[int] | None = None,
    ) -> None:
        """Publish the hashes of blocks[num_cached_blocks:num_full_blocks]. With KV cache
        events on, a `BlockStored` is queued: (kind, keys, num_tokens, parent hash, the
        blocks' tokens when `token_ids`, the request's, are given)."""
        if num_cached_blocks >= num_full_blocks:
            return
        assert len(block_hashes) >= num_full_blocks
        full = blocks[num_cached_blocks:num_full_blocks]
        keys = block_hashes[num_cached_blocks:num_full_blocks]
        if kv_cache_group_id:
            keys = [group_key(key, kv_cache_group_id) for key in keys]
        if _holds_null(full):
            kept = [
                (block, key) for block, key in zip(full, keys, strict=True) if not block.is_null
            ]
            full, keys = [block for block, _ in kept], [key for _, key in kept]
        self.cache_blocks(full, keys)
        if self.enable_kv_cache_events:
            num_tokens = (num_full_blocks - num_cached_blocks) * block_size
            parent = block_hashes[num_cached_blocks - 1] if num_cached_blocks else None
            start, end = num_cached_blocks * block_size, num_full_blocks * block_size
            tokens = tuple(token_ids[start:end]) if token_ids is not None else ()
            self.kv_event_queue.append(("BlockStored", tuple(keys), num_tokens, parent, tokens))

    def cache_blocks(self, blocks: Sequence[KVCacheBlock], keys: Sequence[BlockHash]) -> None:
        """Give each block (none cached yet) its key and map it there."""
        assert _unhashed(blocks), "a block already has a hash"
        self.cached_block_hash_to_block.cache(blocks, keys)  # (nothing to evict)

    def evict(self, blocks: Iterable[KVCacheBlock]) -> int:
        """Drop the hash entry of each block that holds one (they stay where they are);
        returns how many were evicted."""
        return self.rekey(blocks, repeat(None)) if self.enable_caching else 0

    def rekey(self, blocks: Iterable[KVCacheBlock], keys: Iterable[BlockHash | None]) -> int:
        """Evict each block's hash and give it its key from `keys` (pairwise; None: none):
        the one place blocks are evicted and cached. Returns how many were evicted."""
        if not self.enable_kv_cache_events:
            evicted = self.cached_block_hash_to_block.rekey(blocks, keys)
        else:
            dropped: list[BlockHash] = []
            evicted = self.cached_block_hash_to_block.rekey(blocks, keys, dropped)
            self.kv_event_queue.extend(("BlockRemoved", key) for key in dropped)
        self.num_evicted_blocks += evicted
        return evicted

    # -- allocation and release ---------------------------------------------------------------

    def take_free_blocks(
        self, blocks: Sequence[KVCacheBlock], keys: Iterable[BlockHash | None] | None = None
    ) -> None:
        """Blocks just taken from the free queue to hold new KV: their old hashes are evicted,
        and they take `keys` (pairwise) if given."""
        peak = self.max_block_id_used
        if peak < self.num_gpu_blocks - 1:
            for block in blocks:
                if block.block_id > peak:
                    peak = block.block_id
            self.max_block_id_used = peak
        if self.enable_caching:
            if keys is not None:
                self.rekey(blocks, keys)
            elif not _unhashed(blocks):  # only the blocks holding a hash have one to evict
                self.rekey(
                    [block for block in blocks if block._block_hash is not None], repeat(None)
                )
        else:
            assert keys is None, "caching is off"

    def get_new_blocks(self, num_blocks: int) -> list[KVCacheBlock]:
        """Pop `num_blocks` from the head of the free queue, evicting their old hashes."""
        if num_blocks > self.free_block_queue.num_free_blocks:
            raise ValueError(f"Cannot get {num_blocks} free blocks from the pool")
        if num_blocks <= 0:
            return []
        blocks = self.free_block_queue.popleft_n(num_blocks)
        self.take_free_blocks(blocks)
        for block in blocks:
            assert block.ref_cnt == 0
            block.ref_cnt = 1
        return blocks

    def touch(self, blocks: Iterable[KVCacheBlock]) -> None:
        """A cache hit: take free blocks out of the queue and add one reference to each."""
        leaving = []
        leave = leaving.append
        for block in blocks:
            if block.ref_cnt == 0 and not block.is_null:
                leave(block)
            block.ref_cnt += 1
        self.free_block_queue.remove_n(leaving)

    def free_blocks(self, ordered_blocks: Iterable[KVCacheBlock]) -> None:
        """Drop one reference from each block (pass them tail first).

        Blocks reaching zero go to the free queue: unhashed ones (and all of them when caching
        is off) to the head in the given order, hashed ones to the tail.
        """
        caching = self.enable_caching
        to_head, to_tail = [], []
        head, tail = to_head.append, to_tail.append
        for block in ordered_blocks:
            if block.is_null:
                continue
            ref_cnt = block.ref_cnt - 1
            assert ref_cnt >= 0, f"{block} freed more often than referenced"
            block.ref_cnt = ref_cnt
            if ref_cnt == 0:
                if block._block_hash is None or not caching:
                    head(block)
                else:
                    tail(block)
        self.free_block_queue.append_n(to_tail)
        self.free_block_queue.prepend_n(to_head)

    def is_idle(self) -> bool:
        """No block is referenced: every block but the null block is in the free queue."""
        return self.free_block_queue.num_free_blocks == self.num_gpu_blocks - 1

    # Serve one request of a serial replay and release it: its number of hits, or None (and
    # nothing changes) when the free queue cannot hold it. Equal to `touch` + `get_new_blocks`
    # + `cache_full_blocks` + `free_blocks`, in one pass when no block is referenced.
    replay_request = serial_replay.replay_request

    def reset_prefix_cache(self) -> bool:
        """Forget every hash; only possible when every block but the null block is free."""
        if not self.is_idle():
            return False
        self.cached_block_hash_to_block = BlockHashToBlockMap()
        for block in self._blocks:  # an unbuilt block has no hash
            block.reset_hash()
        if self.enable_kv_cache_events:
            self.kv_event_queue.append(("AllBlocksCleared",))
        return True

    def take_events(self) -> list[tuple]:
        events, self.kv_event_queue = self.kv_event_queue, []
        return events

    # -- accounting ---------------------------------------------------------------------------

    def get_num_free_blocks(self) -> int:
        return self.free_block_queue.num_free_blocks

    def get_usage(self) -> float:
        total = self.num_gpu_blocks - 1
        return 1.0 - self.get_num_free_blocks() / total if total else 0.0

    def check_integrity(self) -> None:
        """Assert the pool's invariants (cost O(num_blocks); for tests and debugging)."""
        free = self.free_block_queue.get_all_free_blocks()
        free_ids = {block.block_id for block in free}
        assert len(free) == len(free_ids), "a block is twice in the free queue"
        assert len(free) == self.free_block_queue.num_free_blocks, "free count is stale"
        assert 0 not in free_ids, "the null block is in the free queue"
        for block in self.blocks[1:]:
            assert block.ref_cnt >= 0, f"{block} has a negative reference count"
            in_queue = block.block_id in free_ids
            assert in_queue == (block.ref_cnt == 0), f"{block} is free and referenced, or lost"
        assert len(free) + sum(1 for b in self.blocks[1:] if b.ref_cnt > 0) == (
            self.num_gpu_blocks - 1
        ), "free + used != total"
        assert self.null_block.block_hash is None, "the null block has a hash"
        mapped = 0
        for key, holders in self.cached_block_hash_to_block.items():
            for block in holders:
                assert block.block_hash == key, f"{block} is mapped under another hash"
                assert self.blocks[block.block_id] is block
                mapped += 1
        hashed = sum(1 for block in self.blocks if block.block_hash is not None)
        assert mapped == hashed, "a block has a hash that the map does not hold"
