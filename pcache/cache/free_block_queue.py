"""The pool's free blocks: a doubly linked list, evicted from the head, LRU toward the tail.

Each operation is written once; the single-block ones are the batch ones on one block.

Blocks never used yet need not exist: a queue may hold, after its first blocks, a run of
blocks not built yet (`num_unbuilt`), in id order, each built when an operation first reaches
it. The run stands in the list as one placeholder node; blocks prepended go before it, blocks
appended after it, so it stays where its blocks would be. An unlimited pool (as big as every
block of a trace, per replica of a fleet) then builds only the blocks it uses.
"""

from __future__ import annotations

from collections.abc import Sequence

from pcache.cache.kv_block import KVCacheBlock


class FreeKVCacheBlockQueue:
    """Free blocks as a doubly linked list with fake head and tail, in the given order."""

    def __init__(
        self,
        blocks: Sequence[KVCacheBlock],
        num_unbuilt: int = 0,
        built: list[KVCacheBlock] | None = None,
    ):
        """`blocks` in order, then `num_unbuilt` blocks built when first needed: each takes
        the length of `built` as its id and is appended to it."""
        self.num_free_blocks = 0
        self.fake_head = KVCacheBlock(-1)
        self.fake_tail = KVCacheBlock(-1)
        self.fake_head.next_free_block = self.fake_tail
        self.fake_tail.prev_free_block = self.fake_head
        self.append_n(blocks)
        self.num_unbuilt = num_unbuilt
        self._built = built
        self._unbuilt = KVCacheBlock(-2)  # the placeholder of the unbuilt run
        self._num_before_unbuilt = 0  # a lower bound of the blocks ahead of the placeholder
        if num_unbuilt:
            assert built is not None, "unbuilt blocks need the list they are added to"
            self._num_before_unbuilt = len(blocks)
            self._link(self.fake_tail.prev_free_block, self.fake_tail, (self._unbuilt,))
            self.num_free_blocks += num_unbuilt - 1

    def popleft(self) -> KVCacheBlock:
        if self.num_free_blocks == 0:
            raise ValueError("No free blocks available")
        return self.popleft_n(1)[0]

    def popleft_n(self, n: int) -> list[KVCacheBlock]:
        """Take the first `n` blocks off the head, in queue order."""
        if n == 0:
            return []
        assert self.num_free_blocks >= n, f"asked for {n} blocks, {self.num_free_blocks} free"
        if self.num_unbuilt:
            if self.fake_head.next_free_block is self._unbuilt and n <= self.num_unbuilt:
                popped = self._take_unbuilt(n)  # the unbuilt run is first: build, never link
                self._drop_placeholder()
                return popped
            self._ahead(n)
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
        if self.num_unbuilt:
            self._ahead(n)
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
        if self.num_unbuilt:  # they may have been ahead of the unbuilt run
            self._num_before_unbuilt = max(self._num_before_unbuilt - num_removed, 0)
        return num_removed

    def append(self, block: KVCacheBlock) -> None:
        self.append_n((block,))

    def append_n(self, blocks: Sequence[KVCacheBlock]) -> None:
        """Put `blocks` at the tail, in the given order (the last is evicted last)."""
        self._link(self.fake_tail.prev_free_block, self.fake_tail, blocks)

    def prepend_n(self, blocks: Sequence[KVCacheBlock]) -> None:
        """Put `blocks` at the head, in the given order (the first is evicted first)."""
        self._link(self.fake_head, self.fake_head.next_free_block, blocks)
        self._num_before_unbuilt += len(blocks)

    def _ahead(self, n: int) -> None:
        """Build unbuilt blocks until at least the first `n` of the queue are built (the walks
        of `popleft_n` and `rotate_n` then never reach the placeholder); `n` leave the front."""
        if n > self._num_before_unbuilt:
            self.build(n - self._num_before_unbuilt)
        self._num_before_unbuilt = max(self._num_before_unbuilt - n, 0)

    def build(self, count: int | None = None) -> None:
        """Build the next `count` unbuilt blocks (None: all), where the run stands."""
        count = self.num_unbuilt if count is None else min(count, self.num_unbuilt)
        if count <= 0:
            return
        placeholder = self._unbuilt
        blocks = self._take_unbuilt(count)
        self._link(placeholder.prev_free_block, placeholder, blocks)
        self._num_before_unbuilt += count
        self._drop_placeholder()

    def _take_unbuilt(self, count: int) -> list[KVCacheBlock]:
        """The next `count` unbuilt blocks, built and out of the queue (not linked; the
        caller drops the placeholder if none is left)."""
        built = self._built
        assert built is not None and count <= self.num_unbuilt
        first = len(built)
        blocks = [KVCacheBlock(block_id) for block_id in range(first, first + count)]
        built.extend(blocks)
        self.num_free_blocks -= count
        self.num_unbuilt -= count
        return blocks

    def _drop_placeholder(self) -> None:
        """Unlink the placeholder once no block is left unbuilt."""
        placeholder = self._unbuilt
        if self.num_unbuilt or placeholder.prev_free_block is None:
            return
        previous, following = placeholder.prev_free_block, placeholder.next_free_block
        previous.next_free_block = following
        following.prev_free_block = previous
        placeholder.prev_free_block = placeholder.next_free_block = None

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
        """Every free block in queue order (the unbuilt ones are built first)."""
        self.build()
        blocks = []
        current = self.fake_head.next_free_block
        while current is not self.fake_tail:
            blocks.append(current)
            current = current.next_free_block
        return blocks
