"""SGLang-style radix cache: token-granular prefix matching, LRU eviction of unreferenced leaves.

The tree stores sequences of units (token ids, or block ids of hash-id traces). A match that
ends inside a node splits it, so boundaries are exact. Identical prefixes are stored once.
Eviction removes leaves with no lock, least recently accessed first; a parent left childless
becomes a leaf and a candidate in turn, so a prefix's head never goes before its tail.
Accessing a node (match or insert) refreshes every node on its path. An optional TTL makes
nodes not accessed for `ttl_ms` invisible (hosted-provider profiles). A node inserted with
`visible=False` (a prefill still running) is stored, locked and counted, but lookups stop
before it until `make_visible` is called on it or on a node below it.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from itertools import count

from pcache.cache.radix_edge import split_edge


class RadixNode:
    """A segment of units under its parent; children are keyed by their first unit."""

    __slots__ = ("children", "key", "last_access", "lock_ref", "parent", "visible")

    def __init__(self, key: list, parent: RadixNode | None, now: float, visible: bool = True):
        self.key = key
        self.parent = parent
        self.children: dict = {}
        self.lock_ref = 0
        self.last_access = now
        self.visible = visible


class RadixCache:
    """A radix tree of cached prefixes holding at most `capacity` units (None: unlimited)."""

    def __init__(self, capacity: int | None = None, ttl_ms: float | None = None):
        self.capacity = capacity
        self.ttl_ms = ttl_ms
        self.root = RadixNode([], None, 0.0)
        self.root.lock_ref = 1
        self.num_units = 0
        self.num_evicted_units = 0
        self.peak_units = 0
        self._heap: list = []
        self._tiebreak = count()

    # -- matching -----------------------------------------------------------------------------

    def _expired(self, node: RadixNode, now: float) -> bool:
        return self.ttl_ms is not None and now - node.last_access > self.ttl_ms

    def match_prefix(
        self, key: Sequence, now: float, visible_only: bool = True
    ) -> tuple[int, RadixNode]:
        """Length of the longest cached prefix of `key`, and the node where it ends
        (`visible_only=False`: through nodes not yet visible too)."""
        node, matched = self.root, 0
        while matched < len(key):
            child = node.children.get(key[matched])
            if child is None or self._expired(child, now) or (visible_only and not child.visible):
                break
            segment = child.key
            limit = min(len(segment), len(key) - matched)
            common = 0
            while common < limit and segment[common] == key[matched + common]:
                common += 1
            if common < len(segment):
                child = self._split(child, common)
            node, matched = child, matched + common
            if common < len(segment):
                break
        self._refresh(node, now)
        return matched, node

    def peek_prefix(self, key: Sequence, now: float) -> int:
        """Length of the longest cached prefix of `key`, touching nothing (no split, no refresh)."""
        node, matched = self.root, 0
        while matched < len(key):
            child = node.children.get(key[matched])
            if child is None or self._expired(child, now) or not child.visible:
                break
            segment = child.key
            limit = min(len(segment), len(key) - matched)
            common = 0
            while common < limit and segment[common] == key[matched + common]:
                common += 1
            matched += common
            if common < len(segment):
                break
            node = child
        return matched

    def _split(self, node: RadixNode, at: int) -> RadixNode:
        """Cut `node`'s key after `at` units; the head keeps its locks, time and visibility."""
        parent = node.parent
        head = RadixNode(node.key[:at], parent, node.last_access, node.visible)
        head.lock_ref = node.lock_ref
        node.key = node.key[at:]
        node.parent = head
        return split_edge(parent.children, head.key[0], head, node, node.key[0])

    def _refresh(self, node: RadixNode, now: float) -> None:
        while node is not None:
            node.last_access = max(node.last_access, now)
            if not node.children and node is not self.root:
                heapq.heappush(self._heap, (node.last_access, next(self._tiebreak), node))
            node = node.parent

    # -- insertion and locking ----------------------------------------------------------------

    def insert(self, key: Sequence, now: float, visible: bool = True) -> RadixNode:
        """Cache `key` (evicting as needed); returns its last node, locked by the caller.
        `visible=False`: its new units are found by lookups only after `make_visible`."""
        matched, node = self.match_prefix(key, now, visible_only=False)
        self.lock(node)
        extra = len(key) - matched
        if self.capacity is not None and extra:
            if len(key) > self.capacity:
                self.unlock(node)
                raise ValueError(f"a prompt of {len(key)} units exceeds the capacity")
            self.evict(self.num_units + extra - self.capacity, now)
            if self.num_units + extra > self.capacity:
                self.unlock(node)
                raise ValueError("the cache is held by running requests")
        self.unlock(node)
        if extra:
            leaf = RadixNode(list(key[matched:]), node, now, visible)
            node.children[leaf.key[0]] = leaf
            self.num_units += extra
            self.peak_units = max(self.peak_units, self.num_units)
            node = leaf
            self._refresh(node, now)
        return node

    def make_visible(self, node: RadixNode) -> None:
        """`node` and the path above it are found by lookups from now on (a prefill ended)."""
        while node is not None and not node.visible:
            node.visible = True
            node = node.parent

    def lock(self, node: RadixNode) -> None:
        while node is not None:
            node.lock_ref += 1
            node = node.parent

    def unlock(self, node: RadixNode) -> None:
        while node is not None:
            node.lock_ref -= 1
            assert node.lock_ref >= 0
            if node.lock_ref == 0 and not node.children:  # evictable again
                heapq.heappush(self._heap, (node.last_access, next(self._tiebreak), node))
            node = node.parent

    # -- eviction -----------------------------------------------------------------------------

    def evict(self, num_units: int, now: float) -> int:
        """Remove unlocked leaves, least recently used first, until `num_units` are gone."""
        removed = 0
        while removed < num_units and self._heap:
            stamp, _, node = heapq.heappop(self._heap)
            if node.parent is None or node.children or node.lock_ref or stamp != node.last_access:
                continue
            parent = node.parent
            del parent.children[node.key[0]]
            node.parent = None
            removed += len(node.key)
            self.num_units -= len(node.key)
            if parent is not self.root and not parent.children:
                heapq.heappush(self._heap, (parent.last_access, next(self._tiebreak), parent))
        self.num_evicted_units += removed
        return removed

    def check_integrity(self) -> None:
        """Assert the unit count, parent links and that sibling keys start differently."""
        total, stack = 0, [self.root]
        while stack:
            node = stack.pop()
            for first, child in node.children.items():
                assert child.parent is node and child.key and child.key[0] == first
                assert child.lock_ref >= 0
                total += len(child.key)
                stack.append(child)
        assert total == self.num_units, f"{total} units in the tree, {self.num_units} counted"
        if self.capacity is not None:
            assert self.num_units <= self.capacity
