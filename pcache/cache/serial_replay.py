"""The serial replay's fast path: one request served and released in one call.

`replay_request(pool, hashes, block_size)` equals `touch` + `get_new_blocks` +
`cache_full_blocks` + `free_blocks` (`tests/test_replay_fast_path.py` proves it). When no block
is referenced (a serial replay) it skips the reference counts: the hits leave the free queue,
the new blocks move from its head to its tail (newest first: they are freed tail first) and
are cached there, then the hits go back to the tail, last one first. Otherwise it takes the
general steps.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from pcache.cache.kv_block import BlockHash

if TYPE_CHECKING:
    from pcache.cache.block_pool import BlockPool


def replay_request(
    pool: BlockPool, block_hashes: Sequence[BlockHash], block_size: int
) -> int | None:
    """Serve one request whose blocks are all full and release it; its number of hits, or
    None (and nothing changes) when the free queue cannot hold it."""
    queue = pool.free_block_queue
    num_blocks = len(block_hashes)
    if (
        not pool.is_idle()
        or not pool.enable_caching
        or pool.enable_kv_cache_events
        or num_blocks > queue.num_free_blocks
    ):
        return replay_request_in_steps(pool, block_hashes, block_size)
    hits = pool.cached_block_hash_to_block.leading_hits(block_hashes)
    num_hits = len(hits)
    if queue.remove_n(hits, missing_ok=True) != num_hits:  # a block hit twice is out already:
        hits = list(dict.fromkeys(hits))  # it is freed where its first hit is
    # the new blocks: taken from the head and freed again at once, newest first
    blocks = queue.rotate_n(num_blocks - num_hits)
    pool.take_free_blocks(blocks, block_hashes[num_hits:])  # old hashes go, new ones come
    hits.reverse()  # then the hits, last one first
    queue.append_n(hits)
    return num_hits


def replay_request_in_steps(
    pool: BlockPool, block_hashes: Sequence[BlockHash], block_size: int
) -> int | None:
    """`replay_request` through the general operations (any pool state)."""
    hits = pool.cached_block_hash_to_block.leading_hits(block_hashes)
    num_hits = len(hits)
    num_free_hits = sum(1 for block in hits if block.ref_cnt == 0)
    if len(block_hashes) - num_hits + num_free_hits > pool.get_num_free_blocks():
        return None
    pool.touch(hits)
    blocks = hits + pool.get_new_blocks(len(block_hashes) - num_hits)
    pool.cache_full_blocks(blocks, block_hashes, num_hits, len(block_hashes), block_size)
    pool.free_blocks(reversed(blocks))
    return num_hits
