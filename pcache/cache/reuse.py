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

Two shortcuts follow logs where a prompt shares most of its blocks with the one before it,
neither changing a result (`tests/test_reuse_holders.py` compares them with the plain walk):
a walk starts past the full blocks the prompt shares with the last inserted one (their chained
hashes are that prompt's), and the holders of the last prompt's blocks are written only when a
later prompt leaves its chain (until then, `_holder` names the last prompt for them).

A prompt's own blocks past the first it adds (the new content no earlier prompt shares, most
of a log of unique turns) are kept as one run when nothing can expire: the first new block is
a node, and the rest of the prompt is `runs[that node]`, compared token by token. Nothing under
a run's head is hashed until a later prompt reaches the head; its insert then makes the run
the nodes the plain insert would have made (`_unroll`), so a result never depends on it
(`tests/test_reuse_holders.py`).

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
from dataclasses import dataclass, replace
from itertools import pairwise

from pcache.cache.profiles import Profile, reusable_tokens
from pcache.text.prefix import common_prefix_length, common_run_length


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
    token_ids: Sequence[int]
    root: int
    """The namespace's root: where the chain of the first block starts."""
    matched_blocks: int
    """Full blocks found through their chained hashes."""
    parent: int
    """The chained hash of the last matched full block (the namespace's root if none)."""
    chain: list[int]
    """The chained hashes of the matched full blocks."""
    holder: int | None = None
    """The inserted prompt (its `insert` number) that holds the longest shared prefix: the
    latest prompt through the deepest node the walk reached (None: nothing shared)."""
    skipped: int = 0
    """Full blocks taken from the chain of the last inserted prompt, `skipped_from` (shared
    with it: `insert` compares the chains from there)."""
    skipped_from: list[int] | None = None


@dataclass(frozen=True, slots=True)
class Run:
    """The tokens of prompt `number` past its first new block (a run's head), which no other
    prompt went through."""

    token_ids: tuple[int, ...]
    number: int


def _shared_from(a: Sequence[int], b: Sequence[int], guess: int) -> int:
    """`common_prefix_length(a, b)`, trying first whether they agree on their first `guess`."""
    if 0 < guess <= min(len(a), len(b)):
        if a[:guess] == b[:guess]:
            return common_prefix_length(a, b, guess)
        return common_prefix_length(a[:guess], b)
    return common_prefix_length(a, b)


def _alone(block: tuple[int, ...]) -> list[tuple[int, ...]]:
    return [block]


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
        """The latest prompt through each chain of full blocks and each continuation, except
        on the last prompt's chain (`last`), whose blocks it holds (`_holder`)."""
        self.runs: dict[int, Run] = {}
        """What follows a run's head (a node with no children): see the module."""
        self.num_prompts = 0
        self.last_shared = 0
        """Tokens the last walk found shared with the last prompt: the next walk checks that
        length first (a log's requests often share as much with the one before)."""
        self.last: tuple[int, Sequence[int], list[int]] | None = None
        """The last inserted prompt: its namespace's root, its tokens and the chained hashes of
        its full blocks up to its run's head, or all (a walk skips the blocks a prompt shares
        with it)."""

    def copy(self) -> PrefixIndex:
        other = PrefixIndex(self.block_size, self.lifetime_ms)
        other.clock = self.clock
        other.touched = OrderedDict(self.touched)
        other.blocks = set(self.blocks)
        other.children = {parent: list(kids) for parent, kids in self.children.items()}
        other.holders = dict(self.holders)
        other.runs = dict(self.runs)
        other.num_prompts = self.num_prompts
        other.last_shared = self.last_shared
        other.last = self.last
        return other

    def match(self, token_ids: Sequence[int], namespace: str | None = None) -> Match:
        """The longest prefix of `token_ids` shared with an inserted prompt (what the index
        holds does not change; the length shared with the last prompt is kept as a guess)."""
        size = self.block_size
        root = parent = hash(("namespace", namespace)) if namespace else 0
        chain: list[int] = []
        index = 0
        last = self.last
        skipped_from = None
        if last is not None and last[0] == root:
            # the blocks shared with the last prompt are in the index with the same hashes
            shared = _shared_from(token_ids, last[1], self.last_shared)
            self.last_shared = shared
            index = min(shared // size, len(last[2]))
            if index:
                chain = last[2][:index]
                parent = chain[-1]
                skipped_from = last[2]
        skipped = index
        index, parent = self._walk(token_ids, index, parent, chain)
        length = index * size
        holder = self._holder(parent, index) if index else None
        run = self.runs.get(parent) if index else None
        if run is not None:  # the rest of one prompt: as far as it agrees, it holds it
            shared = common_run_length(token_ids, length, run.token_ids, 0)
            if shared:
                length += shared
                holder = run.number
            return Match(
                length, token_ids, root, index, parent, chain, holder, skipped, skipped_from
            )
        rest = tuple(token_ids[index * size : (index + 1) * size])
        kids = self.children.get(parent)
        if kids and rest:
            at = bisect_left(kids, rest)
            near = kids[max(at - 1, 0) : at + 1]
            shared = [common_prefix_length(rest, kid) for kid in near]
            best = max(shared)
            if best:
                length += best
                kid = near[shared.index(best)]
                if len(kid) == size:
                    found = self._holder(hash((parent, kid)), index + 1)
                else:
                    found = self.holders.get((parent, kid))
                holder = holder if found is None else found
        return Match(length, token_ids, root, index, parent, chain, holder, skipped, skipped_from)

    def insert(self, match: Match, now: float | None = None) -> int:
        """Remember the prompt `match` was computed for (sent at `now`, ms, when known);
        returns its number (0, 1, ...)."""
        number = self.num_prompts
        size = self.block_size
        token_ids = match.token_ids
        if self.runs and match.parent in self.runs:
            self._unroll(match.parent, match.matched_blocks)
            match = self._walk_on(match)
        start = match.matched_blocks * size
        if self.lifetime_ms is None and len(token_ids) - start >= 2 * size:
            head = hash((match.parent, tuple(token_ids[start : start + size])))
            if head not in self.blocks:  # new from here: one node, then a run
                return self._insert_run(match, head)
        new_blocks = list(zip(*[iter(token_ids[start:])] * size, strict=False))
        tail = tuple(token_ids[start + len(new_blocks) * size :])
        parent = match.parent
        created = []
        add = created.append
        for block in new_blocks:
            parent = hash((parent, block))
            add(parent)
        children, add_child = self.children, self._add_child
        if new_blocks:
            add_child(match.parent, new_blocks[0])
            if children.keys().isdisjoint(created):  # new chains: each block the only child
                children.update(zip(created[:-1], map(_alone, new_blocks[1:]), strict=True))
            else:
                for before, block in zip(created[:-1], new_blocks[1:], strict=True):
                    add_child(before, block)
        self.blocks.update(created)
        holders = self.holders
        tail_added = bool(tail) and add_child(parent, tail)
        if tail_added:
            holders[(parent, tail)] = number  # (a prefix of a longer one keeps its holder)
        if self.lifetime_ms is not None:
            self._stamp(match, created, new_blocks, now, tail if tail_added else ())
        return self._inserted(match, match.chain + created)

    def _insert_run(self, match: Match, head: int) -> int:
        """`insert` of a prompt new from its next full block on: that block's node, and the
        rest as the run under it."""
        size = self.block_size
        start = match.matched_blocks * size
        self._add_child(match.parent, tuple(match.token_ids[start : start + size]))
        self.blocks.add(head)
        self.runs[head] = Run(tuple(match.token_ids[start + size :]), self.num_prompts)
        return self._inserted(match, [*match.chain, head])

    def _inserted(self, match: Match, chain: list[int]) -> int:
        """The prompt of `match`, whose full blocks (up to its run's head) are `chain`, is the
        last one now; returns its number. The last prompt's blocks that it leaves stay that
        prompt's own (their holders are written)."""
        number = self.num_prompts
        if self.last is not None:
            before = self.last[2]
            known = match.skipped if match.skipped_from is before else 0
            kept = common_prefix_length(before, chain, known)
            if kept < len(before):
                self.holders.update(dict.fromkeys(before[kept:], number - 1))
        self.last = (match.root, match.token_ids, chain)
        self.num_prompts += 1
        return number

    def _walk(
        self, token_ids: Sequence[int], index: int, parent: int, chain: list[int]
    ) -> tuple[int, int]:
        """From full block `index` (after the node `parent`), the full blocks of `token_ids` the
        index holds, their chained hashes added to `chain`: (blocks matched, the last node)."""
        size, seen = self.block_size, self.blocks
        while (index + 1) * size <= len(token_ids):
            chained = hash((parent, tuple(token_ids[index * size : (index + 1) * size])))
            if chained not in seen:
                break
            parent = chained
            chain.append(chained)
            index += 1
        return index, parent

    def _walk_on(self, match: Match) -> Match:
        """`match` taken on through the full blocks the index has now (a run was unrolled)."""
        chain = list(match.chain)
        index, parent = self._walk(match.token_ids, match.matched_blocks, match.parent, chain)
        return replace(match, matched_blocks=index, parent=parent, chain=chain)

    def _unroll(self, head: int, depth: int) -> None:
        """Make the run under `head` (the chained hash of `depth` full blocks) the nodes and
        holders the plain insert made for its prompt."""
        run = self.runs.pop(head)
        size, tokens, number = self.block_size, run.token_ids, run.number
        blocks = list(zip(*[iter(tokens)] * size, strict=False))
        tail = tokens[len(blocks) * size :]
        created = []
        parent = head
        for block in blocks:
            self.children[parent] = [block]
            parent = hash((parent, block))
            created.append(parent)
        self.blocks.update(created)
        self.holders[head] = number
        self.holders.update(dict.fromkeys(created, number))
        if tail:
            self.children[parent] = [tail]
            self.holders[(parent, tail)] = number
        last = self.last
        if last is not None and number == self.num_prompts - 1 and len(last[2]) == depth:
            self.last = (last[0], last[1], [*last[2], *created])  # its chain, all of it again

    def _stamp(
        self,
        match: Match,
        created: list[int],
        new_blocks: list[tuple[int, ...]],
        now: float | None,
        tail: tuple[int, ...],
    ) -> None:
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
        for chained, block in zip(created, new_blocks, strict=True):
            touched[chained] = (stamp, parent, block)
            touched.move_to_end(chained)
            parent = chained
        if tail:
            key = (parent, tail)
            touched[key] = (stamp, parent, tail)
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
        if not touched or next(iter(touched.values()))[0] >= cutoff:
            return 0
        if self.last is not None:  # its chain may go: name its holders, stop skipping along it
            holders.update(dict.fromkeys(self.last[2], self.num_prompts - 1))
            self.last = None
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

    def _holder(self, node: int, depth: int) -> int | None:
        """The latest prompt through `node`, the chained hash of `depth` full blocks."""
        last = self.last
        if last is not None and depth <= len(last[2]) and last[2][depth - 1] == node:
            return self.num_prompts - 1
        return self.holders.get(node)

    def live_holders(self) -> set[int]:
        """The prompts a match can still name as its holder (the others were passed by later
        prompts everywhere they went)."""
        live = set(self.holders.values())
        live.update(run.number for run in self.runs.values())
        if self.last is not None and self.last[2]:
            live.add(self.num_prompts - 1)
        return live

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
        assert self.last is None or self.blocks.issuperset(self.last[2])
        assert self.blocks.issuperset(self.runs) and self.children.keys().isdisjoint(self.runs)
        assert not self.runs or self.lifetime_ms is None
        stamps = [stamp for stamp, _, _ in self.touched.values()]
        assert stamps == sorted(stamps), "least recently used first"
        for kids in self.children.values():
            assert kids == sorted(kids) and all(0 < len(kid) <= self.block_size for kid in kids)
            assert all(b[: len(a)] != a for a, b in pairwise(kids))
