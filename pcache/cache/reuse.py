"""What a prefix cache holds after a serial, unlimited replay, and how much of a prompt it reuses.

The rules every consumer shares: a prompt reuses the longest token prefix it shares with any
earlier prompt of the same cache namespace (`cache_salt`), rounded by the profile's granularity
(`reusable`). That is what `replay --simulate` computes with an unlimited pool or radix tree
replayed serially; `PrefixIndex` computes it without the pool's bookkeeping (no reference
counts, no free queue, no eviction). `tests/test_reuse_index.py` proves the two equal.

`PrefixIndex` finds full blocks through chained hashes (as the pool does) and the rest of the
longest prefix inside the next block among the continuations earlier prompts had there: those are
kept sorted, and the longest common prefix of a sequence with a sorted set is found at one of its
two neighbours in that order, so the match is exact to the token.

A hosted cache forgets a prefix no request used for its lifetime. Given one (`lifetime_ms`, the
longest the profile allows) and the requests' timestamps, the index stamps every node a prompt
goes through and `expire(now)` forgets those untouched for longer, oldest first (a node is never
stamped later than the nodes before it, so a subtree goes with its root): what it holds follows
the distinct content of one lifetime, not the length of the log.
"""

from __future__ import annotations

from bisect import bisect_left, insort
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import pairwise

from pcache.cache.profiles import Profile, reusable_tokens
from pcache.prefix import common_prefix_length


def reusable(profile: Profile, common: int, num_tokens: int, block_size: int) -> int:
    """Tokens a cache reuses of a prompt of `num_tokens` sharing `common` tokens with it.

    Breakpoint caches (Anthropic) are assumed to have a breakpoint where the shared part ends.
    """
    common = max(0, min(common, num_tokens))
    written = (common,) if profile.granularity == "breakpoint" else ()
    return reusable_tokens(profile, common, num_tokens, block_size, written)


@dataclass(slots=True)
class Match:
    """Where a prompt's walk through the index stopped (reused by `PrefixIndex.insert`)."""

    length: int
    """Tokens shared with the longest matching earlier prompt."""
    blocks: list[tuple[int, ...]]
    tail: tuple[int, ...]
    matched_blocks: int
    parent: int
    chain: list[int]
    """The chained hashes of the matched full blocks."""
    holder: int | None = None
    """The inserted prompt (its `insert` number) that holds the longest shared prefix: the
    latest prompt through the deepest node the walk reached (None: nothing shared)."""


class PrefixIndex:
    """Every prompt inserted so far: the longest token prefix a new prompt shares with one."""

    def __init__(self, block_size: int, lifetime_ms: float | None = None):
        assert block_size >= 1
        assert lifetime_ms is None or lifetime_ms > 0
        self.block_size = block_size
        self.lifetime_ms = lifetime_ms
        """Forget nodes no prompt went through for this long (None: never)."""
        self.clock: float | None = None
        """The latest timestamp inserted (prompts without one are stamped with it)."""
        self.touched: OrderedDict[object, tuple[float, int, tuple[int, ...]]] = OrderedDict()
        """(stamp, parent, continuation) of each stamped node, least recently used first."""
        self.blocks: set[int] = set()
        self.children: dict[int, list[tuple[int, ...]]] = {}
        """Sorted distinct continuations (at most one block) after each chain of full blocks."""
        self.holders: dict[object, int] = {}
        """The latest prompt through each chain of full blocks and each continuation."""
        self.num_prompts = 0

    def copy(self) -> PrefixIndex:
        other = PrefixIndex(self.block_size, self.lifetime_ms)
        other.clock = self.clock
        other.touched = OrderedDict(self.touched)
        other.blocks = set(self.blocks)
        other.children = {parent: list(kids) for parent, kids in self.children.items()}
        other.holders = dict(self.holders)
        other.num_prompts = self.num_prompts
        return other

    def match(self, token_ids: Sequence[int], namespace: str | None = None) -> Match:
        """The longest prefix of `token_ids` shared with an inserted prompt (nothing changes)."""
        size = self.block_size
        blocks = list(zip(*[iter(token_ids)] * size, strict=False))
        tail = tuple(token_ids[len(blocks) * size :])
        seen = self.blocks
        parent = hash(("namespace", namespace)) if namespace else 0
        chain: list[int] = []
        index = 0
        while index < len(blocks):
            chained = hash((parent, blocks[index]))
            if chained not in seen:
                break
            parent = chained
            chain.append(chained)
            index += 1
        rest = blocks[index] if index < len(blocks) else tail
        length = index * size
        holder = self.holders.get(parent) if index else None
        kids = self.children.get(parent)
        if kids and rest:
            at = bisect_left(kids, rest)
            near = kids[max(at - 1, 0) : at + 1]
            shared = [common_prefix_length(rest, kid) for kid in near]
            best = max(shared)
            if best:
                length += best
                kid = near[shared.index(best)]
                key = hash((parent, kid)) if len(kid) == size else (parent, kid)
                holder = self.holders.get(key, holder)
        return Match(length, blocks, tail, index, parent, chain, holder)

    def insert(self, match: Match, now: float | None = None) -> int:
        """Remember the prompt `match` was computed for (sent at `now`, ms, when known);
        returns its number (0, 1, ...)."""
        number = self.num_prompts
        parent = match.parent
        created = []
        add_child, blocks = self._add_child, self.blocks
        for block in match.blocks[match.matched_blocks :]:
            add_child(parent, block)
            parent = hash((parent, block))
            blocks.add(parent)
            created.append(parent)
        holders = self.holders
        holders.update(dict.fromkeys(match.chain, number))
        holders.update(dict.fromkeys(created, number))
        tail_added = bool(match.tail) and add_child(parent, match.tail)
        if tail_added:
            holders[(parent, match.tail)] = number  # (a prefix of a longer one keeps its holder)
        if self.lifetime_ms is not None:
            self._stamp(match, created, now, tail_added)
        self.num_prompts += 1
        return number

    def _stamp(self, match: Match, created: list[int], now: float | None, tail: bool) -> None:
        """Mark the nodes the prompt went through as used at `now` (or the latest time seen);
        a node keeps the parent and continuation it was created with."""
        if now is not None and (self.clock is None or now > self.clock):
            self.clock = now
        if self.clock is None:
            return  # no timestamp yet: nothing can expire
        stamp, touched = self.clock, self.touched
        for chained in match.chain:
            entry = touched.get(chained)
            if entry is not None:  # (a node made before any timestamp is never forgotten)
                touched[chained] = (stamp, entry[1], entry[2])
                touched.move_to_end(chained)
        parent = match.parent
        for chained, block in zip(created, match.blocks[match.matched_blocks :], strict=True):
            touched[chained] = (stamp, parent, block)
            touched.move_to_end(chained)
            parent = chained
        if tail:
            key = (parent, match.tail)
            touched[key] = (stamp, parent, match.tail)
            touched.move_to_end(key)

    def expire(self, now: float | None) -> int:
        """Forget the nodes no prompt went through for longer than the lifetime before `now`
        (ms; None: the latest time inserted); returns how many."""
        if self.lifetime_ms is None:
            return 0
        moment = now if self.clock is None or (now is not None and now > self.clock) else self.clock
        if moment is None:
            return 0
        cutoff = moment - self.lifetime_ms
        touched, children, holders, blocks = self.touched, self.children, self.holders, self.blocks
        forgotten = 0
        while touched:
            key, (stamp, parent, kid) = next(iter(touched.items()))
            if stamp >= cutoff:
                break
            del touched[key]
            holders.pop(key, None)
            blocks.discard(key)  # type: ignore[arg-type]
            children.pop(key, None)
            kids = children.get(parent)
            if kids is not None:
                at = bisect_left(kids, kid)
                if at < len(kids) and kids[at] == kid:
                    del kids[at]
                if not kids:
                    del children[parent]
            forgotten += 1
        return forgotten

    def live_holders(self) -> set[int]:
        """The prompts a match can still name as its holder (the others were passed by later
        prompts everywhere they went)."""
        return set(self.holders.values())

    def observe(self, token_ids: Sequence[int], namespace: str | None = None) -> int:
        """Shared prefix length with the earlier prompts, then remember this prompt."""
        found = self.match(token_ids, namespace)
        self.insert(found)
        return found.length

    def _add_child(self, parent: int, continuation: tuple[int, ...]) -> bool:
        """Add a continuation after `parent`; False when a longer one already holds it. (A
        partial one's holder is set by `insert`; a full block's holder is its chained hash's,
        which every prompt through it updates.)"""
        kids = self.children.setdefault(parent, [])
        at = bisect_left(kids, continuation)
        if at < len(kids) and kids[at][: len(continuation)] == continuation:
            return len(kids[at]) == len(continuation)  # already there, or a prefix of one
        if at and continuation[: len(kids[at - 1])] == kids[at - 1]:
            self.holders.pop((parent, kids[at - 1]), None)
            kids[at - 1] = continuation  # extends the one before it (which sorts just before)
        else:
            insort(kids, continuation, lo=at)
        return True

    def check_integrity(self) -> None:
        assert all(0 <= number < self.num_prompts for number in self.holders.values())
        stamps = [stamp for stamp, _, _ in self.touched.values()]
        assert stamps == sorted(stamps), "least recently used first"
        for kids in self.children.values():
            assert kids == sorted(kids) and all(0 < len(kid) <= self.block_size for kid in kids)
            assert all(b[: len(a)] != a for a, b in pairwise(kids))
