"""Cost attribution: how many tokens of each request a cache reuses, as is and if fixed.

`PrefixIndex` is an unbounded cache of every prompt seen so far (so "as is" is itself an upper
bound: no eviction, no TTL): the longest token prefix a new prompt shares with any earlier one,
found through chained hashes of full blocks and refined token by token inside the next block.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pcache.cache.profiles import Profile, reusable_tokens
from pcache.prefix import common_prefix_length

if TYPE_CHECKING:
    from pcache.rules.context import LintContext


class PrefixIndex:
    """Longest common token prefix of a prompt with every prompt inserted before it."""

    def __init__(self, block_size: int):
        self.block_size = block_size
        self.blocks: set[int] = set()
        self.next_block: dict[int, tuple[int, ...]] = {}
        self.num_prompts = 0

    def observe(self, token_ids: list[int]) -> int:
        """Common prefix length with the earlier prompts, then remember this prompt."""
        size = self.block_size
        blocks = list(zip(*[iter(token_ids)] * size, strict=False))
        tail = tuple(token_ids[len(blocks) * size :])
        seen, following = self.blocks, self.next_block
        parent = 0
        matched = 0
        index = 0
        while index < len(blocks):  # the part already cached
            chained = hash((parent, blocks[index]))
            if chained not in seen:
                break
            matched += size
            parent = chained
            index += 1
        if index < len(blocks):
            matched += common_prefix_length(blocks[index], following.get(parent) or ())
        elif tail:
            matched += common_prefix_length(tail, following.get(parent) or ())
        for block in blocks[index:]:  # the new part
            chained = hash((parent, block))
            seen.add(chained)
            known = following.get(parent)
            if known is None or len(known) < size:
                following[parent] = block
            parent = chained
        if tail:
            following.setdefault(parent, tail)
        self.num_prompts += 1
        return matched

    def check_integrity(self) -> None:
        assert all(len(block) <= self.block_size for block in self.next_block.values())


def reusable(profile: Profile, common: int, num_tokens: int, block_size: int) -> int:
    """Tokens a cache reuses given `common` shared tokens (breakpoints assumed at `common`)."""
    common = max(0, min(common, num_tokens))
    written = (common,) if profile.granularity == "breakpoint" else ()
    return reusable_tokens(profile, common, num_tokens, block_size, written)


def expected_shared(context: LintContext) -> int:
    """Tokens of the current request a cache could reuse if nothing broke (an upper bound).

    After an earlier request of the session: its prompt, and on engines that cache generated
    tokens (vLLM, SGLang) also its reply. For a session's first request: the tools and system
    prompt that every session shares.
    """
    current = context.current
    if not current.is_chat:
        return 0
    num_tokens = len(current.token_ids)
    if context.previous is None:
        return current.tokens_before_message(current.first_turn_index)
    expected = min(len(context.previous.token_ids), num_tokens)
    if context.settings.profile.granularity in ("block", "token"):
        with_reply = min(len(context.previous.messages) + 1, len(current.messages))
        expected = max(expected, current.tokens_before_message(with_reply))
    return expected
