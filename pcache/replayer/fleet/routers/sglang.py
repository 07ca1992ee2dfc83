"""`sglang`: SGLang router's `cache_aware` policy, as the code of sglang-router 0.3.x runs it.

Input: the text view (the messages' contents joined, no chat template, no tools; hash-id
traces: each block's characters). State: one multi-tenant character radix tree
(`TenantTree`), and the requests in flight per worker that the router counts itself.

Per request:
1. Imbalanced when max load - min load > `balance_abs` and max load > `balance_rel` x min
   load: route to the least-loaded worker (and insert the text for it).
2. Otherwise walk the tree: match rate = matched characters / text characters. Above
   `cache_threshold` (strict), route to a tenant of the deepest node reached (the first key of
   a DashMap in the router, an arbitrary one; here the lowest-numbered, to be
   deterministic).
3. Below it, **the code of sglang-router 0.3.x sends the request to the least-loaded worker,
   ties to the first**, where its documentation (and later SMG docs) say "the worker with the
   smallest tree" (`get_smallest_tenant`). `fallback` chooses: `least-load` (the code,
   default) or `smallest-tree` (the documented rule, fewest characters, ties to the first).
   In a serial replay every load is 0, so with the code's rule every request below the
   threshold goes to worker 0 (as measured behind the real 0.3.2 router).
4. Insert the text for the chosen worker.

Eviction: every `eviction_interval_s` seconds of trace time, each worker holding more than
`max_tree_chars` characters loses its least recently used leaves until it is under the limit.

Checked against sglang-router 0.3.2 over two pcache serve replicas
(tests/router/test_router_predictions.py): serial replays, and replays with one request held
in flight (loads 1 and 0), split and hit exactly as predicted, with replica i the router's
worker i in its `GET /workers` order (which changes from run to run of the router).

Defaults (sglang-router CLI): cache_threshold 0.3, balance_abs 64, balance_rel 1.5,
eviction_interval_s 120, max_tree_chars 2**26.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pcache.errors import UsageError
from pcache.replayer.fleet.routers.request import FleetState, RoutedRequest
from pcache.replayer.fleet.routers.tenant_tree import TenantTree

FALLBACKS = ("least-load", "smallest-tree")


@dataclass(frozen=True, slots=True)
class Parameters:
    """sglang's parameters (sglang-router's flags)."""

    cache_threshold: float = field(default=0.3, metadata={"maximum": 1})
    """Match rate above which the request follows the tree (`--cache-threshold`)."""
    balance_abs: int = 64
    """Load difference that, with `balance_rel`, means imbalance (`--balance-abs-threshold`)."""
    balance_rel: float = 1.5
    """Load ratio that, with `balance_abs`, means imbalance (`--balance-rel-threshold`)."""
    eviction_interval_s: float = field(default=120.0, metadata={"above": 0})
    """Seconds of trace time between evictions (`--eviction-interval`)."""
    max_tree_chars: int = 2**26
    """Characters each worker may hold in the tree (`--max-tree-size`)."""
    fallback: str = "least-load"
    """Below the threshold: least-load (0.3.x code) or smallest-tree (its documentation)."""

    def __post_init__(self) -> None:
        if self.fallback not in FALLBACKS:
            raise UsageError(
                f"sglang.fallback must be least-load or smallest-tree, got {self.fallback!r}"
            )


class Router:
    """cache_aware: tree affinity when loads are balanced, least load otherwise."""

    def __init__(self, num_replicas: int, parameters: Parameters):
        self.parameters = parameters
        self.tree = TenantTree(num_replicas)
        self.next_eviction_ms: float | None = None

    def route(self, request: RoutedRequest, fleet: FleetState) -> int:
        parameters = self.parameters
        now = request.now_ms
        interval = parameters.eviction_interval_s * 1000.0
        if self.next_eviction_ms is None:
            self.next_eviction_ms = now + interval
        elif now >= self.next_eviction_ms:
            for tenant in range(fleet.num_replicas):
                self.tree.evict(tenant, parameters.max_tree_chars)
            self.next_eviction_ms = now + interval
        loads = fleet.in_flight
        high, low = max(loads), min(loads)
        if high - low > parameters.balance_abs and high > parameters.balance_rel * low:
            chosen = fleet.least_loaded()
        else:
            matched, node = self.tree.prefix_match(request.units, request.unit_chars)
            rate = matched / request.text_chars if request.text_chars else 0.0
            if rate > parameters.cache_threshold and node.tenants:
                chosen = min(node.tenants)
            elif parameters.fallback == "least-load":
                chosen = fleet.least_loaded()
            else:
                counts = self.tree.tenant_chars
                chosen = min(range(len(counts)), key=counts.__getitem__)
        self.tree.insert(request.units, request.unit_chars, chosen, now)
        return chosen
