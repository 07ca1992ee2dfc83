"""The report's prefix tree: every node counts exactly the prompts that share its prefix, and
folding keeps every request in one band."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from pcache.report.tree import PrefixTrie, fold, iter_branches

prompts = st.lists(st.lists(st.integers(0, 3), min_size=1, max_size=12), min_size=1, max_size=40)


def _trie(sequences, unit=1):
    trie = PrefixTrie(unit)
    for sequence in sequences:
        trie.insert(sequence, len(sequence) * unit)
    return trie


@settings(max_examples=100, deadline=None)
@given(prompts)
def test_each_node_counts_the_prompts_sharing_its_prefix(sequences):
    root = fold(_trie(sequences), max_nodes=10_000, max_children=10_000)
    assert root.requests == len(sequences)
    for branch in iter_branches(root):
        if branch is root:
            continue
        prefix = sequences[branch.first_request][: branch.end]
        sharing = [i for i, s in enumerate(sequences) if s[: branch.end] == prefix]
        assert branch.requests == len(sharing)
        assert branch.first_request == sharing[0]
        assert branch.end > branch.start
        assert not branch.folded
        for child in branch.children:
            assert child.start == branch.end


@settings(max_examples=100, deadline=None)
@given(prompts, st.integers(1, 6), st.integers(1, 3))
def test_folding_keeps_every_request_once(sequences, max_nodes, max_children):
    root = fold(_trie(sequences, unit=4), max_nodes=max_nodes, max_children=max_children)
    drawn = [branch for branch in iter_branches(root) if not branch.folded]
    assert len(drawn) - 1 <= max_nodes
    for branch in iter_branches(root):
        assert sum(child.requests for child in branch.children) <= branch.requests
        if branch.folded:
            assert branch.folded >= 1
            assert sum(requests for requests, _ in branch.strips) == branch.requests
            ends = [end for _, end in branch.strips]
            assert ends == sorted(ends, reverse=True)


def test_namespaces_share_nothing():
    trie = PrefixTrie()
    trie.insert([1, 2, 3], 3, "tenant-a")
    trie.insert([1, 2, 3], 3, "tenant-b")
    trie.insert([1, 2, 4], 3, "tenant-a")
    root = fold(trie)
    tenants = root.children
    assert [tenant.requests for tenant in tenants] == [2, 1]
    assert [child.end for child in tenants[0].children] == [2]  # a's two prompts share [1, 2]
