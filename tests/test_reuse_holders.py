"""Property: `PrefixIndex`'s shortcuts (the blocks shared with the last prompt skipped, the last
prompt's holders written when a later prompt leaves its chain) change nothing it returns.

The oracle is the plain walk: every full block hashed from the root, every holder written at
once, in a dozen lines. Both see the same prompts, matched (and some only matched, as lint's
spliced candidates are), inserted, and copied midway (as lint's fixed-log cache is).
"""

from __future__ import annotations

from bisect import bisect_left, insort

from hypothesis import given, settings
from hypothesis import strategies as st

from pcache.cache.reuse import PrefixIndex
from pcache.text.prefix import common_prefix_length


class PlainIndex:
    """Every block hashed, every holder written: what the index computes, slowly."""

    def __init__(self, size: int):
        self.size, self.seen, self.children, self.holders = size, set(), {}, {}
        self.count = 0

    def match(self, tokens, namespace):
        size = self.size
        parent = hash(("namespace", namespace)) if namespace else 0
        chain, index = [], 0
        while index < len(tokens) // size:
            chained = hash((parent, tuple(tokens[index * size : (index + 1) * size])))
            if chained not in self.seen:
                break
            parent, index = chained, index + 1
            chain.append(chained)
        rest = tuple(tokens[index * size : (index + 1) * size])
        length, holder = index * size, self.holders.get(parent) if index else None
        kids = self.children.get(parent)
        if kids and rest:
            at = bisect_left(kids, rest)
            near = kids[max(at - 1, 0) : at + 1]
            shared = [common_prefix_length(rest, kid) for kid in near]
            if max(shared):
                kid = near[shared.index(max(shared))]
                key = hash((parent, kid)) if len(kid) == size else (parent, kid)
                length, holder = length + max(shared), self.holders.get(key, holder)
        return length, holder, (tokens, index, parent, chain)

    def insert(self, walked) -> None:
        tokens, index, parent, chain = walked
        size, number = self.size, self.count
        blocks = [tuple(tokens[i : i + size]) for i in range(0, len(tokens) - size + 1, size)]
        for node in chain:
            self.holders[node] = number
        for block in blocks[index:]:
            self._add(parent, block)
            parent = hash((parent, block))
            self.seen.add(parent)
            self.holders[parent] = number
        tail = tuple(tokens[len(blocks) * size :])
        if tail and self._add(parent, tail):
            self.holders[(parent, tail)] = number
        self.count += 1

    def _add(self, parent, continuation) -> bool:
        kids = self.children.setdefault(parent, [])
        at = bisect_left(kids, continuation)
        if at < len(kids) and kids[at][: len(continuation)] == continuation:
            return len(kids[at]) == len(continuation)
        if at and continuation[: len(kids[at - 1])] == kids[at - 1]:
            self.holders.pop((parent, kids[at - 1]), None)
            kids[at - 1] = continuation
        else:
            insort(kids, continuation, lo=at)
        return True

    def copy(self) -> PlainIndex:
        other = PlainIndex(self.size)
        other.seen, other.holders, other.count = set(self.seen), dict(self.holders), self.count
        other.children = {parent: list(kids) for parent, kids in self.children.items()}
        return other


STEMS = st.lists(st.integers(0, 2), max_size=30)
PROMPTS = st.lists(
    st.tuples(
        st.integers(0, 2),  # which stem
        st.integers(0, 30),  # how much of it
        st.lists(st.integers(0, 3), max_size=12),  # its own tail
        st.sampled_from([None, None, "tenant-a"]),
        st.booleans(),  # inserted (else only matched)
    ),
    min_size=1,
    max_size=14,
)


@settings(max_examples=400, deadline=None)
@given(
    stems=st.lists(STEMS, min_size=1, max_size=3),
    prompts=PROMPTS,
    size=st.integers(1, 5),
    copy_at=st.integers(0, 14),
)
def test_the_index_returns_what_the_plain_walk_returns(stems, prompts, size, copy_at):
    index, plain = PrefixIndex(size), PlainIndex(size)
    for number, (stem, cut, tail, namespace, inserted) in enumerate(prompts):
        if number == copy_at:
            index, plain = index.copy(), plain.copy()
        tokens = stems[stem % len(stems)][:cut] + tail
        found = index.match(tokens, namespace)
        length, holder, walked = plain.match(tokens, namespace)
        assert (found.length, found.holder) == (length, holder)
        if inserted:
            assert index.insert(found) == plain.count
            plain.insert(walked)
            assert set(plain.holders.values()) <= index.live_holders()
    index.check_integrity()


def test_a_prompts_own_blocks_are_one_run_until_a_later_prompt_reaches_them():
    index, plain = PrefixIndex(2), PlainIndex(2)
    prompts = [[1, 2, 3, 4, 5, 6, 7], [1, 2, 8, 9, 9, 9], [1, 2, 3, 4, 5, 6, 7, 8], [1, 2, 8, 9, 7]]
    runs = []
    for tokens in prompts:
        found = index.match(tokens, None)
        length, holder, walked = plain.match(tokens, None)
        assert (found.length, found.holder) == (length, holder)
        index.insert(found)
        plain.insert(walked)
        runs.append(len(index.runs))
        index.check_integrity()
    # [1, 2] is a node and [3, 4, 5, 6, 7] its run; the second prompt reaches that head: the
    # run becomes blocks, and the second's own [8, 9, 9, 9] the run under [8, 9]; the third
    # adds one block to the first's; the fourth reaches the second's head
    assert runs == [1, 1, 1, 0]
    copied = index.copy()
    assert copied.match([1, 2, 3, 4, 5, 6, 9], None).length == 6
