"""The KV block pool with vLLM 0.33 prefix-caching semantics (one full-attention group).

Used by both drivers: the simulator (`pcache replay --simulate`) and the engine's paged KV
cache. Public API (stable):

- `KVCacheBlock(block_id)`: `block_id`, `ref_cnt`, `block_hash` (None until the block is full
  and cached), `prev_free_block` / `next_free_block` (free-list links), `is_null`.
- `FreeKVCacheBlockQueue(blocks)`: O(1) doubly linked list with fake head and tail, initially
  in block-id order: `popleft`, `popleft_n`, `remove`, `append`, `append_n`, `prepend_n`,
  `get_all_free_blocks`, `num_free_blocks`.
- `BlockPool(num_blocks, enable_caching=True)`: block 0 is the null block (never cached,
  never freed), so the usable capacity is `num_blocks - 1`. `get_new_blocks(n)` pops from the
  head of the free queue and drops the popped block's hash entry (lazy eviction);
  `touch(blocks)` takes hit blocks out of the free queue and adds a reference;
  `free_blocks(blocks)` (pass them tail first) returns unhashed blocks to the head and hashed
  ones to the tail; `cache_full_blocks(...)` publishes hashes at scheduling time;
  `get_cached_block(hash)`, `reset_prefix_cache()`, `get_num_free_blocks()`, `get_usage()`,
  `check_integrity()`.

Block hashes are any hashable value: the chained `bytes` of `pcache.cache.hashing`, or the
integer ids of hash-id traces. Identical blocks are not de-duplicated: two blocks may hold the
same hash, and lookups return the first inserted.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Sequence

BlockHash = Hashable


class KVCacheBlock:
    """One physical KV block: its id, reference count, hash and free-list links."""

    __slots__ = (
        "_block_hash",
        "block_id",
        "is_null",
        "next_free_block",
        "prev_free_block",
        "ref_cnt",
    )

    def __init__(self, block_id: int):
        self.block_id = block_id
        self.ref_cnt = 0
        self._block_hash: BlockHash | None = None
        self.prev_free_block: KVCacheBlock | None = None
        self.next_free_block: KVCacheBlock | None = None
        self.is_null = False

    @property
    def block_hash(self) -> BlockHash | None:
        return self._block_hash

    @block_hash.setter
    def block_hash(self, block_hash: BlockHash) -> None:
        assert self._block_hash is None, "the block already has a hash"
        self._block_hash = block_hash

    def reset_hash(self) -> None:
        self._block_hash = None

    def __repr__(self) -> str:
        return f"KVCacheBlock(id={self.block_id}, ref={self.ref_cnt}, hash={self._block_hash!r})"


class FreeKVCacheBlockQueue:
    """Free blocks as a doubly linked list: evict from the head, LRU order toward the tail."""

    def __init__(self, blocks: Sequence[KVCacheBlock]):
        self.num_free_blocks = len(blocks)
        self.fake_head = KVCacheBlock(-1)
        self.fake_tail = KVCacheBlock(-1)
        previous = self.fake_head
        for block in blocks:
            previous.next_free_block = block
            block.prev_free_block = previous
            previous = block
        previous.next_free_block = self.fake_tail
        self.fake_tail.prev_free_block = previous

    def popleft(self) -> KVCacheBlock:
        first = self.fake_head.next_free_block
        if first is self.fake_tail or first is None:
            raise ValueError("No free blocks available")
        self._unlink(first)
        return first

    def popleft_n(self, n: int) -> list[KVCacheBlock]:
        if n == 0:
            return []
        assert self.num_free_blocks >= n, f"asked for {n} blocks, {self.num_free_blocks} free"
        popped = [None] * n
        current = self.fake_head.next_free_block
        for index in range(n):
            popped[index] = current
            following = current.next_free_block
            current.prev_free_block = current.next_free_block = None
            current = following
        self.fake_head.next_free_block = current
        current.prev_free_block = self.fake_head
        self.num_free_blocks -= n
        return popped

    def remove(self, block: KVCacheBlock) -> None:
        if block.prev_free_block is None or block.next_free_block is None:
            raise RuntimeError(f"remove() called on a block not in the free queue: {block}")
        self._unlink(block)

    def _unlink(self, block: KVCacheBlock) -> None:
        previous, following = block.prev_free_block, block.next_free_block
        previous.next_free_block = following
        following.prev_free_block = previous
        block.prev_free_block = block.next_free_block = None
        self.num_free_blocks -= 1

    def append(self, block: KVCacheBlock) -> None:
        last = self.fake_tail.prev_free_block
        last.next_free_block = block
        block.prev_free_block = last
        block.next_free_block = self.fake_tail
        self.fake_tail.prev_free_block = block
        self.num_free_blocks += 1

    def append_n(self, blocks: Sequence[KVCacheBlock]) -> None:
        if not blocks:
            return
        last = self.fake_tail.prev_free_block
        for block in blocks:
            block.prev_free_block = last
            last.next_free_block = block
            last = block
        last.next_free_block = self.fake_tail
        self.fake_tail.prev_free_block = last
        self.num_free_blocks += len(blocks)

    def prepend_n(self, blocks: Sequence[KVCacheBlock]) -> None:
        """Put `blocks` at the head, in the given order (the first is evicted first)."""
        if not blocks:
            return
        first = self.fake_head.next_free_block
        previous = self.fake_head
        for block in blocks:
            block.prev_free_block = previous
            previous.next_free_block = block
            previous = block
        previous.next_free_block = first
        first.prev_free_block = previous
        self.num_free_blocks += len(blocks)

    def get_all_free_blocks(self) -> list[KVCacheBlock]:
        blocks = []
        current = self.fake_head.next_free_block
        while current is not self.fake_tail:
            blocks.append(current)
            current = current.next_free_block
        return blocks


class BlockHashToBlockMap:
    """hash -> block, or hash -> {block_id: block} when several blocks hold the same hash."""

    def __init__(self) -> None:
        self._cache: dict = {}

    def get_one_block(self, key: BlockHash) -> KVCacheBlock | None:
        entry = self._cache.get(key)
        if entry is None or isinstance(entry, KVCacheBlock):
            return entry
        return next(iter(entry.values()))

    def leading_hits(self, block_hashes: Sequence[BlockHash]) -> list[KVCacheBlock]:
        """One block for each leading hash found, stopping at the first miss."""
        cache, hits = self._cache, []
        for key in block_hashes:
            entry = cache.get(key)
            if entry is None:
                break
            hits.append(entry if type(entry) is KVCacheBlock else next(iter(entry.values())))
        return hits

    def insert(self, key: BlockHash, block: KVCacheBlock) -> None:
        cache = self._cache
        entry = cache.setdefault(key, block)
        if entry is block:
            return
        if entry is None:
            self._cache[key] = block
        elif isinstance(entry, KVCacheBlock):
            self._cache[key] = {entry.block_id: entry, block.block_id: block}
        else:
            entry[block.block_id] = block

    def pop(self, key: BlockHash, block_id: int) -> KVCacheBlock | None:
        entry = self._cache.pop(key, None)
        if entry is None:
            return None
        if isinstance(entry, KVCacheBlock):
            if entry.block_id == block_id:
                return entry
            self._cache[key] = entry
            return None
        block = entry.pop(block_id, None)
        if len(entry) == 1:
            self._cache[key] = next(iter(entry.values()))
        elif entry:
            self._cache[key] = entry
        return block

    def items(self) -> Iterable[tuple[BlockHash, list[KVCacheBlock]]]:
        for key, entry in self._cache.items():
            yield key, [entry] if isinstance(entry, KVCacheBlock) else list(entry.values())

    def __len__(self) -> int:
        return len(self._cache)


def group_key(block_hash: BlockHash, kv_cache_group_id: int) -> BlockHash:
    """The map key of a hash in one KV-cache group (group 0 is the bare hash)."""
    return block_hash if kv_cache_group_id == 0 else (block_hash, kv_cache_group_id)


class BlockPool:
    """All KV blocks, the free queue and the hash map; block 0 is the null block."""

    def __init__(
        self, num_blocks: int, enable_caching: bool = True, enable_kv_cache_events: bool = False
    ):
        assert num_blocks >= 1, "a pool needs at least the null block"
        self.num_gpu_blocks = num_blocks
        self.enable_caching = enable_caching
        self.blocks = [KVCacheBlock(i) for i in range(num_blocks)]
        self.free_block_queue = FreeKVCacheBlockQueue(self.blocks)
        self.cached_block_hash_to_block = BlockHashToBlockMap()
        self.null_block = self.free_block_queue.popleft()
        self.null_block.is_null = True
        self.num_evicted_blocks = 0
        # blocks leave the free queue in id order the first time, so this is also the number
        # of blocks that ever held KV (the pool's high-water mark)
        self.max_block_id_used = 0
        self.enable_kv_cache_events = enable_kv_cache_events
        self.kv_event_queue: list[tuple] = []

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
    ) -> None:
        """Publish the hashes of blocks[num_cached_blocks:num_full_blocks]."""
        if num_cached_blocks >= num_full_blocks:
            return
        assert len(block_hashes) >= num_full_blocks
        stored = []
        hash_map = self.cached_block_hash_to_block
        setdefault = hash_map._cache.setdefault
        for index in range(num_cached_blocks, num_full_blocks):
            block = blocks[index]
            if block.is_null:
                continue
            key = block_hashes[index]
            if kv_cache_group_id:
                key = group_key(key, kv_cache_group_id)
            assert block._block_hash is None, "the block already has a hash"
            block._block_hash = key
            if setdefault(key, block) is not block:  # another block holds this hash
                hash_map.insert(key, block)
            stored.append(key)
        if self.enable_kv_cache_events:
            num_tokens = (num_full_blocks - num_cached_blocks) * block_size
            self.kv_event_queue.append(("BlockStored", tuple(stored), num_tokens))

    # -- allocation and release ---------------------------------------------------------------

    def get_new_blocks(self, num_blocks: int) -> list[KVCacheBlock]:
        """Pop `num_blocks` from the head of the free queue, evicting their old hashes."""
        queue = self.free_block_queue
        if num_blocks > queue.num_free_blocks:
            raise ValueError(f"Cannot get {num_blocks} free blocks from the pool")
        if num_blocks <= 0:
            return []
        # FreeKVCacheBlockQueue.popleft_n and the eviction of each block, in one pass
        evict_here = self.enable_caching and not self.enable_kv_cache_events
        cache = self.cached_block_hash_to_block._cache
        peak = self.max_block_id_used
        blocks = [None] * num_blocks
        block = queue.fake_head.next_free_block
        for index in range(num_blocks):
            blocks[index] = block
            following = block.next_free_block
            block.prev_free_block = block.next_free_block = None
            if block.block_id > peak:
                peak = block.block_id
            key = block._block_hash
            if key is not None:
                if evict_here and cache.get(key) is block:
                    del cache[key]  # the common case of _maybe_evict_cached_block
                    block._block_hash = None
                    self.num_evicted_blocks += 1
                elif self.enable_caching:
                    self._maybe_evict_cached_block(block)
            assert block.ref_cnt == 0
            block.ref_cnt = 1
            block = following
        queue.fake_head.next_free_block = block
        block.prev_free_block = queue.fake_head
        queue.num_free_blocks -= num_blocks
        self.max_block_id_used = peak
        return blocks

    def _maybe_evict_cached_block(self, block: KVCacheBlock) -> bool:
        key = block.block_hash
        if key is None:
            return False
        if self.cached_block_hash_to_block.pop(key, block.block_id) is None:
            return False
        block.reset_hash()
        self.num_evicted_blocks += 1
        if self.enable_kv_cache_events:
            self.kv_event_queue.append(("BlockRemoved", key))
        return True

    def evict_blocks(self, block_ids: Iterable[int]) -> None:
        """Drop the hash entries of these blocks (they stay where they are)."""
        for block_id in block_ids:
            self._maybe_evict_cached_block(self.blocks[block_id])

    def touch(self, blocks: Iterable[KVCacheBlock]) -> None:
        """A cache hit: take free blocks out of the queue and add one reference to each."""
        queue = self.free_block_queue
        for block in blocks:
            if block.ref_cnt == 0 and not block.is_null:
                previous, following = block.prev_free_block, block.next_free_block
                if previous is None or following is None:
                    raise RuntimeError(f"touch() found a free block outside the queue: {block}")
                previous.next_free_block = following
                following.prev_free_block = previous
                block.prev_free_block = block.next_free_block = None
                queue.num_free_blocks -= 1
            block.ref_cnt += 1

    def free_blocks(self, ordered_blocks: Iterable[KVCacheBlock]) -> None:
        """Drop one reference from each block (pass them tail first).

        Blocks reaching zero go to the free queue: unhashed ones (and all of them when caching
        is off) to the head in the given order, hashed ones to the tail.
        """
        queue = self.free_block_queue
        evict_first = []
        caching = self.enable_caching
        # FreeKVCacheBlockQueue.append_n, one block at a time
        last = queue.fake_tail.prev_free_block
        num_appended = 0
        for block in ordered_blocks:
            if block.is_null:
                continue
            ref_cnt = block.ref_cnt - 1
            assert ref_cnt >= 0, f"{block} freed more often than referenced"
            block.ref_cnt = ref_cnt
            if ref_cnt == 0:
                if block._block_hash is None or not caching:
                    evict_first.append(block)
                else:
                    block.prev_free_block = last
                    last.next_free_block = block
                    last = block
                    num_appended += 1
        if num_appended:
            last.next_free_block = queue.fake_tail
            queue.fake_tail.prev_free_block = last
            queue.num_free_blocks += num_appended
        queue.prepend_n(evict_first)

    def replay_request(self, block_hashes: Sequence[BlockHash], block_size: int) -> int | None:
        """Serve one request of a serial replay and release it; returns its number of hits,
        or None (and changes nothing) when the free queue cannot hold it.

        The request's blocks are all full: the leading run of cached hashes is hit, every
        other hash gets a new block and is cached, then every block is freed, tail first.
        Equal to `touch` + `get_new_blocks` + `cache_full_blocks` + `free_blocks`; when no
        block is referenced (a serial replay) it runs in one pass with no per-block reference
        counting: the new blocks and the hits go straight from where they are to the tail.
        """
        queue = self.free_block_queue
        num_blocks = len(block_hashes)
        if (
            queue.num_free_blocks != self.num_gpu_blocks - 1
            or not self.enable_caching
            or self.enable_kv_cache_events
            or num_blocks > queue.num_free_blocks
        ):
            return self._replay_request_in_steps(block_hashes, block_size)
        cache = self.cached_block_hash_to_block._cache
        lookup, block_type = cache.get, KVCacheBlock
        # the hits leave the free queue (a hit seen twice is already out: its links are None)
        hits = []
        add_hit = hits.append
        repeated = False
        for key in block_hashes:
            block = lookup(key)
            if block is None:
                break
            if type(block) is not block_type:
                block = next(iter(block.values()))
            add_hit(block)
            previous, following = block.prev_free_block, block.next_free_block
            if previous is None:
                repeated = True
                continue
            previous.next_free_block = following
            following.prev_free_block = previous
            block.prev_free_block = None
        num_hits = len(hits)
        tail = queue.fake_tail
        if num_hits < num_blocks:  # freed first: the new blocks, newest first
            newest, oldest = self._chain_new_blocks(block_hashes, num_hits)
            last = tail.prev_free_block
            last.next_free_block = newest
            newest.prev_free_block = last
            last = oldest
        else:
            last = tail.prev_free_block
        # then the hits, last one first
        if repeated:  # a block hit twice is freed where its first hit is
            hits = list(dict.fromkeys(hits))
        for block in reversed(hits):
            block.prev_free_block = last
            last.next_free_block = block
            last = block
        last.next_free_block = tail
        tail.prev_free_block = last
        return num_hits

    def _chain_new_blocks(
        self, block_hashes: Sequence[BlockHash], num_hits: int
    ) -> tuple[KVCacheBlock, KVCacheBlock]:
        """`replay_request`'s new blocks, popped from the head and cached: (newest, oldest) of
        a chain linked newest first, the order they are freed in."""
        cache = self.cached_block_hash_to_block._cache
        head = self.free_block_queue.fake_head
        current = head.next_free_block
        newest = oldest = None
        peak, evicted = self.max_block_id_used, 0
        for index in range(num_hits, len(block_hashes)):
            block = current
            current = block.next_free_block
            if block.block_id > peak:
                peak = block.block_id
            key = block._block_hash
            if key is not None:
                if cache.get(key) is block:
                    del cache[key]
                    block._block_hash = None
                    evicted += 1
                else:
                    self._maybe_evict_cached_block(block)
            key = block_hashes[index]
            block._block_hash = key
            if cache.setdefault(key, block) is not block:
                self.cached_block_hash_to_block.insert(key, block)
            block.next_free_block = newest
            if newest is None:
                oldest = block
            else:
                newest.prev_free_block = block
            newest = block
        head.next_free_block = current
        current.prev_free_block = head
        self.max_block_id_used = peak
        self.num_evicted_blocks += evicted
        return newest, oldest

    def _replay_request_in_steps(
        self, block_hashes: Sequence[BlockHash], block_size: int
    ) -> int | None:
        """`replay_request` through the general operations (any pool state)."""
        hits = self.cached_block_hash_to_block.leading_hits(block_hashes)
        num_hits = len(hits)
        num_free_hits = sum(1 for block in hits if block.ref_cnt == 0)
        if len(block_hashes) - num_hits + num_free_hits > self.get_num_free_blocks():
            return None
        self.touch(hits)
        blocks = hits + self.get_new_blocks(len(block_hashes) - num_hits)
        self.cache_full_blocks(blocks, block_hashes, num_hits, len(block_hashes), block_size)
        self.free_blocks(reversed(blocks))
        return num_hits

    def reset_prefix_cache(self) -> bool:
        """Forget every hash; only possible when every block but the null block is free."""
        num_used = self.num_gpu_blocks - self.get_num_free_blocks()
        if num_used != 1:
            return False
        self.cached_block_hash_to_block = BlockHashToBlockMap()
        for block in self.blocks:
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
