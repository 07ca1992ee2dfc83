"""The pool's hash map: block hash -> the cached block(s) holding it.

Identical blocks are not de-duplicated: a hash maps to one block, or to `{block_id: block}`
when several hold it, and lookups return the first inserted. Block hashes are any hashable
value (chained `bytes`, or the integer ids of hash-id traces).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from pcache.cache.kv_block import BlockHash, KVCacheBlock


def _first(holders: dict[int, KVCacheBlock]) -> KVCacheBlock:
    return next(iter(holders.values()))


def group_key(block_hash: BlockHash, kv_cache_group_id: int) -> BlockHash:
    """The map key of a hash in one KV-cache group (group 0 is the bare hash)."""
    return block_hash if kv_cache_group_id == 0 else (block_hash, kv_cache_group_id)


class BlockHashToBlockMap:
    """hash -> block, or hash -> {block_id: block} when several blocks hold the same hash."""

    def __init__(self) -> None:
        self._cache: dict[BlockHash, KVCacheBlock | dict[int, KVCacheBlock]] = {}

    def get_one_block(self, key: BlockHash) -> KVCacheBlock | None:
        entry = self._cache.get(key)
        if entry is None or type(entry) is not dict:
            return entry
        return _first(entry)

    def leading_hits(self, block_hashes: Sequence[BlockHash]) -> list[KVCacheBlock]:
        """One block for each leading hash found, stopping at the first miss."""
        lookup, hits = self._cache.get, []
        add = hits.append
        for key in block_hashes:
            entry = lookup(key)
            if entry is None:
                break
            add(entry if type(entry) is not dict else _first(entry))
        return hits

    def num_leading_hits(self, block_hashes: Iterable[BlockHash]) -> int:
        """How many leading hashes are found, stopping at the first miss (`leading_hits`'
        length, without the blocks)."""
        cache, count = self._cache, 0
        for key in block_hashes:
            if key not in cache:
                break
            count += 1
        return count

    def insert(self, key: BlockHash, block: KVCacheBlock) -> None:
        """Map `key` to `block`, beside any block that holds it already."""
        entry = self._cache.setdefault(key, block)
        if entry is not block:
            self._add_holder(key, entry, block)

    def cache(self, blocks: Iterable[KVCacheBlock], keys: Iterable[BlockHash | None]) -> None:
        """Give each block, none of which holds a hash, its key from `keys` (pairwise; None:
        no key) and map it there: `rekey` without the evictions."""
        setdefault = self._cache.setdefault
        for block, key in zip(blocks, keys, strict=False):
            if key is not None:
                block._block_hash = key
                entry = setdefault(key, block)
                if entry is not block:  # another block holds this key too
                    self._add_holder(key, entry, block)

    def rekey(
        self,
        blocks: Iterable[KVCacheBlock],
        keys: Iterable[BlockHash | None],
        dropped: list[BlockHash] | None = None,
    ) -> int:
        """Each block drops the hash it holds, with its entry here (lazy eviction), and takes
        its key from `keys` (pairwise; None: no new key). Returns how many hashes were
        dropped; `dropped`, if given, receives them."""
        cache = self._cache
        pop, setdefault = cache.pop, cache.setdefault
        evicted = 0
        for block, key in zip(blocks, keys, strict=False):
            old = block._block_hash
            if old is not None:
                entry = pop(old, None)
                if entry is block or (
                    entry is not None and self._keep_others(old, entry, block.block_id)
                ):
                    block._block_hash = None
                    evicted += 1
                    if dropped is not None:
                        dropped.append(old)
            if key is not None:
                block._block_hash = key
                entry = setdefault(key, block)
                if entry is not block:  # another block holds this key too
                    self._add_holder(key, entry, block)
        return evicted

    def pop(self, key: BlockHash, block_id: int) -> KVCacheBlock | None:
        """Unmap block `block_id` from `key`; the block, or None if it was not mapped there."""
        entry = self._cache.pop(key, None)
        return None if entry is None else self._keep_others(key, entry, block_id)

    def _add_holder(self, key: BlockHash, entry, block: KVCacheBlock) -> None:
        """`block` also holds `key`, which `entry` (a block or a dict of them) holds."""
        if type(entry) is dict:
            entry[block.block_id] = block
        else:
            self._cache[key] = {entry.block_id: entry, block.block_id: block}

    def _keep_others(self, key: BlockHash, entry, block_id: int) -> KVCacheBlock | None:
        """`entry` was just popped from `key`: put back every block but `block_id`; returns
        that block, or None if it was not there."""
        if type(entry) is not dict:
            if entry.block_id == block_id:
                return entry
            self._cache[key] = entry
            return None
        block = entry.pop(block_id, None)
        if len(entry) == 1:
            self._cache[key] = _first(entry)
        elif entry:
            self._cache[key] = entry
        return block

    def items(self) -> Iterable[tuple[BlockHash, list[KVCacheBlock]]]:
        for key, entry in self._cache.items():
            yield key, list(entry.values()) if type(entry) is dict else [entry]

    def __len__(self) -> int:
        return len(self._cache)
