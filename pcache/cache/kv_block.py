"""One physical KV block of the pool: its id, reference count, hash and free-list links.

`block_hash` is None until the block is full and cached; setting it twice is a bug (an
assertion), `reset_hash()` clears it. The pool's own loops (`block_pool`, `serial_replay`)
read and write `_block_hash` directly: the property costs several times a slot access on
the replay's hot path.
"""

from __future__ import annotations

from collections.abc import Hashable

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
