"""A multi-tenant radix tree over a text view (SGLang router's `tree.rs`, in Python).

Keys are strings (one node edge per run of characters) or sequences of hash ids, each id
weighing its block's characters. Every node records, per tenant (replica), when that tenant
last routed a request through it; each tenant's character count is the characters of the
nodes it is on, and its leaves (its nodes none of whose children it is on) are kept as a set,
so that evicting never walks the tree. `prefix_match` walks as far as the text matches and
returns the matched characters and the deepest node reached (a partly matched edge counts, as
in `tree.rs`);
`insert` adds the text for a tenant; `evict` removes a tenant's least recently used leaves
until its count is within a limit (SGLang's rule); `evict_oldest` removes a tenant's nodes a
timestamp at a time, oldest first, until enough characters are gone (Ray's rule).
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence

from pcache.cache.radix_edge import split_edge


class Node:
    """One edge of the tree and the tenants that reached its end."""

    __slots__ = ("chars", "children", "key", "parent", "tenants", "weights")

    def __init__(self, key: Sequence, weights: Sequence[int] | None, parent: Node | None):
        self.key = key
        self.weights = weights
        self.chars = len(key) if weights is None else sum(weights)
        self.parent = parent
        self.children: dict = {}
        self.tenants: dict[int, float] = {}


def _chars(weights: Sequence[int] | None, start: int, stop: int) -> int:
    return stop - start if weights is None else sum(weights[start:stop])


class TenantTree:
    """The tree, and each tenant's character count."""

    def __init__(self, num_tenants: int):
        self.root = Node((), None, None)
        self.root.tenants = dict.fromkeys(range(num_tenants), 0.0)
        self.tenant_chars = [0] * num_tenants
        self.leaves: list[set[Node]] = [set() for _ in range(num_tenants)]
        """Each tenant's leaves: its nodes (not the root) none of whose children it is on."""

    def prefix_match(self, units: Sequence, weights: Sequence[int] | None) -> tuple[int, Node]:
        """Matched characters of the text, and the deepest node the walk reached."""
        node, position, matched = self.root, 0, 0
        while position < len(units):
            child = node.children.get(units[position])
            if child is None:
                break
            edge = child.key
            limit = min(len(edge), len(units) - position)
            common = 1
            while common < limit and edge[common] == units[position + common]:
                common += 1
            matched += _chars(weights, position, position + common)
            position += common
            node = child
            if common < len(edge):
                break
        return matched, node

    def _split(self, node: Node, at: int) -> Node:
        """Cut `node`'s edge after `at` units; the head keeps the tenants."""
        head_weights = None if node.weights is None else node.weights[:at]
        head = Node(node.key[:at], head_weights, node.parent)
        head.tenants = dict(node.tenants)
        parent = node.parent
        assert parent is not None
        node.key = node.key[at:]
        node.weights = None if node.weights is None else node.weights[at:]
        node.chars -= head.chars
        node.parent = head
        return split_edge(parent.children, head.key[0], head, node, node.key[0])

    def _visit(self, node: Node, tenant: int, now: float) -> None:
        """`tenant` reached `node`, whose parent it is on (a tenant on a node is on its
        parent): a node it is new on is one of its leaves, and the parent no longer is."""
        if tenant not in node.tenants:
            self.tenant_chars[tenant] += node.chars
            leaves = self.leaves[tenant]
            leaves.discard(node.parent)
            leaves.add(node)
        node.tenants[tenant] = now

    def insert(self, units: Sequence, weights: Sequence[int] | None, tenant: int, now: float):
        """Put the text in the tree for `tenant`, refreshing its time along the path."""
        node, position = self.root, 0
        node.tenants[tenant] = now
        while position < len(units):
            child = node.children.get(units[position])
            if child is None:
                rest = None if weights is None else list(weights[position:])
                leaf = Node(units[position:], rest, node)
                node.children[units[position]] = leaf
                self._visit(leaf, tenant, now)
                return
            edge = child.key
            limit = min(len(edge), len(units) - position)
            common = 1
            while common < limit and edge[common] == units[position + common]:
                common += 1
            if common < len(edge):
                child = self._split(child, common)
            self._visit(child, tenant, now)
            node, position = child, position + common

    def _is_leaf_of(self, node: Node, tenant: int) -> bool:
        return not any(tenant in child.tenants for child in node.children.values())

    def evict(self, tenant: int, max_chars: int) -> None:
        """Drop `tenant`'s least recently used leaves until it has at most `max_chars`."""
        if self.tenant_chars[tenant] <= max_chars:
            return
        leaves = self.leaves[tenant]
        heap = [(node.tenants[tenant], id(node), node) for node in leaves]
        heapq.heapify(heap)
        while heap and self.tenant_chars[tenant] > max_chars:
            _, _, node = heapq.heappop(heap)
            del node.tenants[tenant]
            leaves.remove(node)
            self.tenant_chars[tenant] -= node.chars
            parent = node.parent
            assert parent is not None
            if not node.tenants and not node.children:
                del parent.children[node.key[0]]
            if parent is not self.root and self._is_leaf_of(parent, tenant):
                heapq.heappush(heap, (parent.tenants[tenant], id(parent), parent))
                leaves.add(parent)

    def evict_oldest(self, tenant: int, min_chars: int) -> int:
        """Drop every `tenant` node of its oldest timestamp, then the next oldest, until at
        least `min_chars` characters (or all it holds) are gone; the characters removed (Ray's
        `evict_tenant_by_lru`). A parent's time is never older than its children's, so a
        timestamp's nodes form whole subtrees of the tenant's leaves."""
        goal = min(min_chars, self.tenant_chars[tenant])
        held: list[tuple[float, int, int, Node]] = []
        stack = [(child, 1) for child in self.root.children.values() if tenant in child.tenants]
        while stack:
            node, depth = stack.pop()
            held.append((node.tenants[tenant], -depth, id(node), node))
            stack.extend(
                (child, depth + 1) for child in node.children.values() if tenant in child.tenants
            )
        held.sort()
        removed, index = 0, 0
        leaves = self.leaves[tenant]
        while removed < goal and index < len(held):
            stamp = held[index][0]
            while index < len(held) and held[index][0] == stamp:
                node = held[index][3]
                del node.tenants[tenant]
                leaves.discard(node)
                self.tenant_chars[tenant] -= node.chars
                removed += node.chars
                parent = node.parent
                assert parent is not None
                if not node.tenants:
                    assert not node.children, "a child outlived its last tenant's parent"
                    del parent.children[node.key[0]]
                if parent is not self.root and self._is_leaf_of(parent, tenant):
                    leaves.add(parent)  # (a parent of the same timestamp goes next)
                index += 1
        return removed

    def check_integrity(self) -> None:
        """Each tenant's count is the characters of its nodes; a tenant's node's parent has it;
        each tenant's leaves are the set it keeps."""
        counts = [0] * len(self.tenant_chars)
        leaves: list[set[Node]] = [set() for _ in self.tenant_chars]
        stack = list(self.root.children.values())
        while stack:
            node = stack.pop()
            assert node.tenants or node.children, "a node no tenant holds has children"
            for tenant in node.tenants:
                counts[tenant] += node.chars
                assert node.parent is not None and tenant in node.parent.tenants
                if self._is_leaf_of(node, tenant):
                    leaves[tenant].add(node)
            stack.extend(node.children.values())
        assert counts == self.tenant_chars, (counts, self.tenant_chars)
        assert leaves == self.leaves, "a tenant's set of leaves is stale"
