"""`KVCacheManager`: vLLM 0.33's prefix-caching manager for one full-attention group.

Public API (stable; the simulator and the engine both drive it):

- `KVCacheManager(num_blocks, block_size, enable_caching=True, max_model_len=8192,
  log_stats=True)`; block 0 of the pool is the null block.
- `get_computed_blocks(request) -> (blocks, num_computed_tokens)`: the longest run of leading
  cached blocks, capped at `num_tokens - 1` rounded down to whole blocks (the last token is
  always recomputed to get logits). No side effects. Requests with
  `skip_reading_prefix_cache` (prompt logprobs) never read the cache, but still write it.
- `allocate_slots(request, num_new_tokens, num_new_computed_tokens=0,
  new_computed_blocks=None, num_lookahead_tokens=0) -> list[KVCacheBlock] | None`: returns
  the newly allocated blocks, or None (and changes nothing) when the free queue cannot hold
  them plus the hit blocks that are free. On success the hits are touched, new blocks popped
  from the free queue, and every block that became full is cached right away.
- `free(request)`: all of the request's blocks back, tail first.
- `get_block_ids(request_id)`, `record_prefix_cache_stats(request, num_hits)`,
  `make_prefix_cache_stats()`, `reset_prefix_cache()`, `usage`, `check_integrity()`.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from pcache.cache.block_pool import BlockPool, KVCacheBlock
from pcache.cache.request import CacheRequest


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


@dataclass(slots=True)
class PrefixCacheStats:
    """Token-based prefix-cache counters, as vLLM's `PrefixCacheStats`."""

    reset: bool = False
    requests: int = 0
    queries: int = 0
    hits: int = 0
    preempted_requests: int = 0
    preempted_queries: int = 0
    preempted_hits: int = 0

    def record(self, num_tokens: int, num_hits: int, preempted: bool = False) -> None:
        if preempted:
            self.preempted_requests += 1
            self.preempted_queries += num_tokens
            self.preempted_hits += num_hits
        else:
            self.requests += 1
            self.queries += num_tokens
            self.hits += num_hits

    @property
    def hit_rate(self) -> float:
        return self.hits / self.queries if self.queries else 0.0


class KVCacheManager:
    """Block tables of running requests over one `BlockPool`, with prefix caching."""

    def __init__(
        self,
        num_blocks: int,
        block_size: int,
        enable_caching: bool = True,
        max_model_len: int = 8192,
        log_stats: bool = True,
        enable_kv_cache_events: bool = False,
    ):
        assert block_size >= 1
        self.block_size = block_size
        self.enable_caching = enable_caching
        self.max_model_len = max_model_len
        self.block_pool = BlockPool(num_blocks, enable_caching, enable_kv_cache_events)
        self.req_to_blocks: defaultdict[str, list[KVCacheBlock]] = defaultdict(list)
        self.num_cached_block: dict[str, int] = {}
        self.prefix_cache_stats = PrefixCacheStats() if log_stats else None

    # -- lookup -------------------------------------------------------------------------------

    def get_computed_blocks(self, request: CacheRequest) -> tuple[list[KVCacheBlock], int]:
        if not self.enable_caching or request.skip_reading_prefix_cache:
            return [], 0
        max_cache_hit_length = request.num_tokens - 1
        blocks = self.find_longest_cache_hit(request.block_hashes, max_cache_hit_length)
        return blocks, len(blocks) * self.block_size

    def find_longest_cache_hit(self, block_hashes: Sequence, max_length: int) -> list[KVCacheBlock]:
        lookup = self.block_pool.cached_block_hash_to_block
        return lookup.leading_hits(block_hashes[: max(max_length, 0) // self.block_size])

    # -- allocation ---------------------------------------------------------------------------

    def get_num_blocks_to_allocate(
        self, request_id: str, num_tokens: int, new_computed_blocks: Sequence[KVCacheBlock]
    ) -> int:
        num_required = cdiv(num_tokens, self.block_size)
        num_held = len(self.req_to_blocks[request_id]) if request_id in self.req_to_blocks else 0
        num_new = max(num_required - len(new_computed_blocks) - num_held, 0)
        num_evictable_hits = sum(
            1 for block in new_computed_blocks if block.ref_cnt == 0 and not block.is_null
        )
        return num_new + num_evictable_hits

    def allocate_slots(
        self,
        request: CacheRequest,
        num_new_tokens: int,
        num_new_computed_tokens: int = 0,
        new_computed_blocks: Sequence[KVCacheBlock] | None = None,
        num_lookahead_tokens: int = 0,
        delay_cache_blocks: bool = False,
    ) -> list[KVCacheBlock] | None:
        """Slots for `num_new_tokens` more tokens (None: not enough free blocks). The blocks
        that are now full are published at once, unless `delay_cache_blocks` (vLLM's flag of
        the same name): then `cache_blocks` publishes them later."""
        if num_new_tokens == 0:
            raise ValueError("num_new_tokens must be greater than 0")
        hits = list(new_computed_blocks or ())
        num_computed_tokens = min(
            request.num_computed_tokens + num_new_computed_tokens, self.max_model_len
        )
        num_tokens_need_slot = min(
            num_computed_tokens + num_new_tokens + num_lookahead_tokens, self.max_model_len
        )
        request_id = request.request_id
        num_to_allocate = self.get_num_blocks_to_allocate(request_id, num_tokens_need_slot, hits)
        if num_to_allocate > self.block_pool.get_num_free_blocks():
            return None
        # hits join the block table first
        if request_id not in self.num_cached_block:
            if self.enable_caching:
                self.block_pool.touch(hits)
            self.req_to_blocks[request_id].extend(hits)
            self.num_cached_block[request_id] = len(hits)
        else:
            assert not hits, "a running request cannot take new computed blocks"
        # then new blocks from the head of the free queue
        request_blocks = self.req_to_blocks[request_id]
        num_new = cdiv(num_tokens_need_slot, self.block_size) - len(request_blocks)
        new_blocks = self.block_pool.get_new_blocks(num_new) if num_new > 0 else []
        request_blocks.extend(new_blocks)
        # and every block that is now full is published
        if self.enable_caching and not delay_cache_blocks:
            self.cache_blocks(
                request, min(num_computed_tokens + num_new_tokens, request.num_tokens)
            )
        return new_blocks

    def cache_blocks(self, request: CacheRequest, num_tokens: int) -> None:
        request_id = request.request_id
        num_cached = self.num_cached_block.get(request_id, 0)
        num_full = min(num_tokens, len(request.block_hashes) * self.block_size) // self.block_size
        if num_cached >= num_full:
            return
        self.block_pool.cache_full_blocks(
            self.req_to_blocks[request_id],
            request.block_hashes,
            num_cached,
            num_full,
            self.block_size,
            token_ids=request.all_token_ids if self.block_pool.enable_kv_cache_events else None,
        )
        self.num_cached_block[request_id] = num_full

    def free(self, request: CacheRequest) -> None:
        blocks = self.req_to_blocks.pop(request.request_id, [])
        self.block_pool.free_blocks(reversed(blocks))
        self.num_cached_block.pop(request.request_id, None)

    # -- stats and accounting -----------------------------------------------------------------

    def record_prefix_cache_stats(
        self, request: CacheRequest, num_hits: int, preempted: bool = False
    ) -> None:
        if self.prefix_cache_stats is not None:
            self.prefix_cache_stats.record(request.num_tokens, num_hits, preempted)

    def make_prefix_cache_stats(self) -> PrefixCacheStats | None:
        stats = self.prefix_cache_stats
        if stats is None:
            return None
        self.prefix_cache_stats = PrefixCacheStats()
        return stats

    def reset_prefix_cache(self) -> bool:
        if not self.block_pool.reset_prefix_cache():
            return False
        if self.prefix_cache_stats is not None:
            self.prefix_cache_stats.reset = True
        return True

    def get_block_ids(self, request_id: str) -> tuple[list[int], ...]:
        return ([block.block_id for block in self.req_to_blocks.get(request_id, [])],)

    @property
    def usage(self) -> float:
        return self.block_pool.get_usage()

    def check_integrity(self) -> None:
        """Assert the pool's invariants and that block tables explain every reference."""
        self.block_pool.check_integrity()
        references: dict[int, int] = defaultdict(int)
        for request_id, blocks in self.req_to_blocks.items():
            assert self.num_cached_block.get(request_id, 0) <= len(blocks)
            for block in blocks:
                references[block.block_id] += 1
        for block in self.block_pool.blocks[1:]:
            assert block.ref_cnt == references[block.block_id], (
                f"{block} has {references[block.block_id]} holders"
            )
