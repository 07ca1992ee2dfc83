"""The prefix-sharing tree of a log: which requests share which prefix, and where they part.

A radix tree over the prompts in arrival order. A prompt is a sequence of units: token ids
(request logs, one unit a token) or block ids (hash-id traces, one unit a block of
`unit_tokens` tokens). Each node is a run of units that the same set of requests share; its
`requests` went through it, the first of them (`first_request`) computed it, the later ones
could reuse it. Edges point into the prompts they came from, so the tree costs a few objects
per request, not a copy of the tokens.

`fold` keeps the branches that carry most requests (at most `max_nodes`) and folds the rest of
each branch point into one node that counts what it holds.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from dataclasses import dataclass, field

from pcache.cache.radix_edge import split_edge
from pcache.text.prefix import common_prefix_length


class _Node:
    __slots__ = ("children", "end", "first_request", "length_sum", "owner", "requests", "start")

    def __init__(self, owner: int, start: int, end: int, first_request: int):
        self.owner = owner  # the prompt whose units [start, end) label the edge into this node
        self.start = start
        self.end = end
        self.requests = 0
        self.first_request = first_request
        self.length_sum = 0  # prompt tokens of the requests through this node (their mean end)
        self.children: dict[object, _Node] = {}


class PrefixTrie:
    """Prompts inserted in arrival order; the shared runs of units found by walking it."""

    def __init__(self, unit_tokens: int = 1):
        assert unit_tokens >= 1
        self.unit_tokens = unit_tokens
        self.prompts: list[Sequence] = []
        self.lengths: list[int] = []
        self.root = _Node(-1, 0, 0, 0)

    def insert(self, units: Sequence, num_tokens: int, namespace: object = None) -> None:
        """Add the next prompt; prompts of different `namespace`s (cache salts) share nothing."""
        index = len(self.prompts)
        self.prompts.append(units)
        self.lengths.append(num_tokens)
        node = self._namespace_root(namespace, index)
        self._visit(node, num_tokens)
        position = 0
        while position < len(units):
            child = node.children.get(units[position])
            if child is None:
                leaf = _Node(index, position, len(units), index)
                node.children[units[position]] = leaf
                self._visit(leaf, num_tokens)
                return
            edge = self.prompts[child.owner]
            end = child.end
            following = position + 1
            if following < end and (following >= len(units) or edge[following] != units[following]):
                shared = following  # (most prompts that part do so at once)
            elif edge[following:end] == units[following:end]:  # through the whole edge
                shared = end
            else:
                shared = min(common_prefix_length(edge, units, following), end)
            if shared < end:
                child = self._split(node, child, shared)
            self._visit(child, num_tokens)
            node, position = child, shared

    def _namespace_root(self, namespace: object, index: int) -> _Node:
        if namespace is None:
            return self.root
        key = ("namespace", namespace)
        node = self.root.children.get(key)
        if node is None:
            node = _Node(index, 0, 0, index)
            self.root.children[key] = node
        self.root.requests += 1
        self.root.length_sum += self.lengths[index]
        return node

    @staticmethod
    def _visit(node: _Node, num_tokens: int) -> None:
        node.requests += 1
        node.length_sum += num_tokens

    def _split(self, parent: _Node, child: _Node, at: int) -> _Node:
        """Cut the edge into `child` at unit `at`: a new node holds [start, at)."""
        owner_units = self.prompts[child.owner]
        middle = _Node(child.owner, child.start, at, child.first_request)
        middle.requests = child.requests
        middle.length_sum = child.length_sum
        first = owner_units[child.start]
        child.start = at
        return split_edge(parent.children, first, middle, child, owner_units[at])

    def tokens(self, unit: int, request: int) -> int:
        """Token position of unit position `unit` in prompt `request` (the last block may be
        partial)."""
        return min(unit * self.unit_tokens, self.lengths[request])


@dataclass(slots=True)
class Branch:
    """A node of the folded tree: a shared run of tokens and the requests that went through it.

    `folded` > 0: this node stands for that many branches (and their subtrees) not drawn; it
    spans from the branch point to the mean end of its requests' prompts.
    """

    id: int
    start: int
    end: int
    requests: int
    first_request: int
    mean_end: float
    folded: int = 0
    children: list[Branch] = field(default_factory=list)
    strips: list[tuple[int, int]] = field(default_factory=list)
    """Folded nodes: their requests by prompt length, longest first, as (requests, mean end
    token) strips of about equal numbers of requests (the silhouette of what was folded)."""


def _token_end(trie: PrefixTrie, node: _Node) -> int:
    if node.owner < 0:
        return 0
    return trie.tokens(node.end, node.owner)


def fold(
    trie: PrefixTrie, max_nodes: int = 240, max_children: int = 6, max_strips: int = 16
) -> Branch:
    """The tree with at most `max_nodes` drawn nodes (the most-travelled first) plus one folded
    node per branch point for the rest; every request is counted in exactly one leaf path."""
    assert max_nodes >= 1 and max_children >= 1
    counter = iter(range(1 << 62))
    root = Branch(next(counter), 0, 0, trie.root.requests, 0, _mean(trie.root))
    queue: list[tuple[int, int, _Node, Branch]] = [(-trie.root.requests, 0, trie.root, root)]
    drawn = 0  # the root is not drawn
    while queue:
        _, _, node, branch = heapq.heappop(queue)
        children = sorted(node.children.values(), key=lambda child: child.first_request)
        ranked = sorted(children, key=lambda child: -child.requests)
        room = max(0, min(max_children, max_nodes - drawn))
        kept = {id(child) for child in ranked[:room]}
        rest = [child for child in children if id(child) not in kept]
        for child in children:
            if id(child) not in kept:
                continue
            start = _token_end(trie, node) if node.owner >= 0 else 0
            drawn_child = Branch(
                next(counter),
                start,
                _token_end(trie, child),
                child.requests,
                child.first_request,
                _mean(child),
            )
            branch.children.append(drawn_child)
            drawn += 1
            heapq.heappush(queue, (-child.requests, drawn_child.id, child, drawn_child))
        if rest:
            requests = sum(child.requests for child in rest)
            start = _token_end(trie, node) if node.owner >= 0 else 0
            mean_end = sum(child.length_sum for child in rest) / requests
            branch.children.append(
                Branch(
                    next(counter),
                    start,
                    max(start, round(mean_end)),
                    requests,
                    min(child.first_request for child in rest),
                    mean_end,
                    folded=len(rest),
                    strips=_strips(trie, rest, max_strips),
                )
            )
    return root


def _strips(trie: PrefixTrie, nodes: list[_Node], max_strips: int) -> list[tuple[int, int]]:
    """The prompt lengths of every request under `nodes`, longest first, in strips."""
    ends: list[tuple[int, int]] = []  # (end token, requests ending there)
    stack = list(nodes)
    while stack:
        node = stack.pop()
        ending = node.requests - sum(child.requests for child in node.children.values())
        if ending:
            ends.append((_token_end(trie, node), ending))
        stack.extend(node.children.values())
    ends.sort(reverse=True)
    total = sum(count for _, count in ends)
    size = max(1, -(-total // max_strips))
    strips: list[tuple[int, int]] = []
    requests = tokens = 0
    for end, count in ends:
        while count:
            take = min(count, size - requests)
            requests, tokens, count = requests + take, tokens + take * end, count - take
            if requests == size:
                strips.append((requests, round(tokens / requests)))
                requests = tokens = 0
    if requests:
        strips.append((requests, round(tokens / requests)))
    return strips


def _mean(node: _Node) -> float:
    return node.length_sum / node.requests if node.requests else 0.0


def iter_branches(root: Branch):
    """Every node of the folded tree, parents before children."""
    stack = [root]
    while stack:
        branch = stack.pop()
        yield branch
        stack.extend(reversed(branch.children))
