"""The pool's free blocks: a doubly linked list, evicted from the head, LRU toward the tail.

Each operation is written once; the single-block ones are the batch ones on one block.
"""

from __future__ import annotations

from collections.abc import Sequence

from pcache.cache.kv_block import KVCacheBlock


class FreeKVCacheBlockQueue:
    """Free blocks as a doubly linked list with fake head and tail, in the given order."""

    def __init__(self, blocks: Sequence[KVCacheBlock]):
        self.num_free_blocks = 0
        self.fake_head = KVCacheBlock(-1)
        self.fake_tail = KVCacheBlock(-1)
        self.fake_head.next_free_block = self.fake_tail
        self.fake_tail.prev_free_block = self.fake_head
        self.append_n(blocks)

    def popleft(self) -> KVCacheBlock:
        if self.num_free_blocks == 0:
            raise ValueError("No free blocks available")
        return self.popleft_n(1)[0]

    def popleft_n(self, n: int) -> list[KVCacheBlock]:
        """Take the first `n` blocks off the head, in queue order."""
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

    def rotate_n(self, n: int) -> list[KVCacheBlock]:
        """Move the first `n` blocks to the tail, the first one last: blocks taken and freed
        again at once, tail first. Returns them in their old order."""
        if n == 0:
            return []
        assert self.num_free_blocks >= n, f"asked for {n} blocks, {self.num_free_blocks} free"
        head, tail = self.fake_head, self.fake_tail
        moved = [None] * n
        newer = None
        block = head.next_free_block
        for index in range(n):  # each block links to its neighbours in the reversed run
            moved[index] = block
            following = block.next_free_block
            block.next_free_block = newer
            block.prev_free_block = following
            newer = block
            block = following
        head.next_free_block = block  # `block`: the first one kept, or the tail
        block.prev_free_block = head
        last_kept = tail.prev_free_block
        newer.prev_free_block = last_kept  # `newer`: the last one moved, now first of the run
        last_kept.next_free_block = newer
        moved[0].next_free_block = tail
        tail.prev_free_block = moved[0]
        return moved

    def remove(self, block: KVCacheBlock) -> None:
        self.remove_n((block,))

    def remove_n(self, blocks: Sequence[KVCacheBlock], missing_ok: bool = False) -> int:
        """Take each of `blocks` out of wherever it is in the queue; a block already out is an
        error, or skipped with `missing_ok`. Returns how many were taken out."""
        num_missing = 0
        for block in blocks:
            previous, following = block.prev_free_block, block.next_free_block
            if previous is None:
                if not missing_ok:
                    raise RuntimeError(f"remove() called on a block not in the free queue: {block}")
                num_missing += 1
                continue
            previous.next_free_block = following
            following.prev_free_block = previous
            block.prev_free_block = block.next_free_block = None
        num_removed = len(blocks) - num_missing
        self.num_free_blocks -= num_removed
        return num_removed

    def append(self, block: KVCacheBlock) -> None:
        self.append_n((block,))

    def append_n(self, blocks: Sequence[KVCacheBlock]) -> None:
        """Put `blocks` at the tail, in the given order (the last is evicted last)."""
        self._link(self.fake_tail.prev_free_block, self.fake_tail, blocks)

    def prepend_n(self, blocks: Sequence[KVCacheBlock]) -> None:
        """Put `blocks` at the head, in the given order (the first is evicted first)."""
        self._link(self.fake_head, self.fake_head.next_free_block, blocks)

    def _link(
        self, previous: KVCacheBlock, following: KVCacheBlock, blocks: Sequence[KVCacheBlock]
    ) -> None:
        """Chain `blocks` in order between two neighbours in the queue."""
        if not blocks:
            return
        for block in blocks:
            block.prev_free_block = previous
            previous.next_free_block = block
            previous = block
        previous.next_free_block = following
        following.prev_free_block = previous
        self.num_free_blocks += len(blocks)

    def get_all_free_blocks(self) -> list[KVCacheBlock]:
        blocks = []
        current = self.fake_head.next_free_block
        while current is not self.fake_tail:
            blocks.append(current)
            current = current.next_free_block
        return blocks
