"""Cutting an edge of a radix tree in two, the one step every prefix tree of pcache shares.

The trees (`pcache.cache.radix`, the fleet routers' `tenant_tree`, the report's prefix
`tree`) each keep their own nodes; an edge is cut where a new key parts from it: a head node
holding the edge's first units takes the edge's place under the parent, and the node itself,
keeping the rest, hangs below the head.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any


def split_edge(children: dict, first: Hashable, head: Any, tail: Any, tail_first: Hashable) -> Any:
    """Hang `head` in its parent's `children` where the edge starting with unit `first` was,
    and `tail` (the rest of that edge, starting with `tail_first`) below it; returns `head`."""
    children[first] = head
    head.children[tail_first] = tail
    return head
