"""`ray`: Ray Serve LLM's `PrefixCacheAffinityRouter`, as its code reads.

Modelled on ray-project/ray's code as of these commits: `prefix_aware_router.py` at 06c16f2f
and `prefix_tree.py` at 19a1eaa3 (both in `python/ray/llm/_internal/serve/routing_policies/
prefix_aware/`), `serve/_private/request_router/pow_2_router.py` at 04287e4b and the
queue-length selection of `request_router.py`. PyPI's newest Ray is 2.60.0; which release
first ships these commits was not checked, so the version modelled is named by them.

Input: the text view (the messages' contents joined with nothing between them, or the prompt;
list contents: their `text` parts; no chat template). State: one character prefix tree shared
by every router of the deployment (`TenantTree`, tenants = replicas, each node recording when
each replica last inserted through it), and each replica's queue length (its requests in
flight).

Per request:
1. Imbalanced when the highest queue length minus the lowest is above
   `imbalanced_threshold`: no prefix candidates (step 4).
2. Otherwise walk the tree: match rate = matched characters / text characters. Below
   `match_rate_threshold` the candidates are the replicas with the fewest characters in the
   tree (all ties); otherwise the replicas holding the deepest node reached.
3. Of the candidates, the first with the lowest queue length (Ray's strict `<` over the
   candidate list; the list is in replica order here, in Ray the order of a set of replica ids).
4. Without candidates (imbalanced): power of two choices, two distinct replicas drawn from a
   seeded generator (with two replicas, both in a random order), the lower queue length wins,
   ties to the first drawn.
5. The text is inserted for the chosen replica after routing (`on_request_routed`).

An empty text has no match rate (Ray divides by zero); here it counts as 0.

Eviction (`do_eviction`, off by default): every `eviction_interval_secs` of trace time, each
replica holding more than `eviction_threshold_chars` loses its least recently inserted nodes,
a whole insertion at a time (Ray removes every node of the oldest timestamp together), until
at least `count - eviction_target_chars` characters are gone. Ray stamps inserts with the wall
clock; here each insert has its own step of a logical clock, so two inserts never share a
stamp.

Not modelled: `max_ongoing_requests` (a full replica refuses and Ray retries with backoff;
here no replica is ever full), the locality and multiplexed-model tiers (every replica is a
candidate), the queue-length cache's staleness (lengths are exact).

Defaults (the code's `initialize_state`): imbalanced_threshold infinity (here None, no limit;
Ray's documentation says 10; give `ray.imbalanced_threshold=10` for it), match_rate_threshold 0.1,
do_eviction false, eviction_threshold_chars 400,000, eviction_target_chars 360,000,
eviction_interval_secs 10.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from pcache.errors import UsageError
from pcache.replayer.fleet.routers.request import FleetState, RoutedRequest
from pcache.replayer.fleet.routers.tenant_tree import TenantTree


@dataclass(frozen=True, slots=True)
class Parameters:
    """ray's parameters (`PrefixCacheAffinityRouter.initialize_state`), and the fallback's seed."""

    imbalanced_threshold: float | None = None
    """Queue-length spread above which prefix routing is skipped; None (`none` or `inf` on
    the command line): no limit, the code's default of infinity (the documentation says 10)."""
    match_rate_threshold: float = field(default=0.1, metadata={"maximum": 1})
    """Match rate below which the smallest replicas are the candidates."""
    do_eviction: bool = False
    """Whether the tree is trimmed every `eviction_interval_secs`."""
    eviction_threshold_chars: int = 400_000
    """A replica holding more characters than this is trimmed."""
    eviction_target_chars: int = 360_000
    """Characters a trimmed replica keeps at most."""
    eviction_interval_secs: float = field(default=10.0, metadata={"above": 0})
    """Seconds of trace time between eviction checks."""
    seed: int = 0
    """Seed of the power-of-two fallback's generator."""

    def __post_init__(self) -> None:
        if self.eviction_target_chars > self.eviction_threshold_chars:
            raise UsageError(
                "ray.eviction_target_chars must be at most ray.eviction_threshold_chars,"
                f" got {self.eviction_target_chars} > {self.eviction_threshold_chars}"
            )


class Router:
    """Prefix-tree candidates when queues are balanced, power of two choices otherwise."""

    def __init__(self, num_replicas: int, parameters: Parameters):
        self.parameters = parameters
        self.num_replicas = num_replicas
        self.tree = TenantTree(num_replicas)
        self.generator = random.Random(parameters.seed)
        self.clock = 0
        self.next_eviction_ms: float | None = None

    def _evict(self, now_ms: float) -> None:
        parameters = self.parameters
        interval = parameters.eviction_interval_secs * 1000.0
        if self.next_eviction_ms is None:
            self.next_eviction_ms = now_ms + interval
            return
        while now_ms >= self.next_eviction_ms:
            for tenant, count in enumerate(self.tree.tenant_chars):
                if count > parameters.eviction_threshold_chars:
                    self.tree.evict_oldest(tenant, count - parameters.eviction_target_chars)
            self.next_eviction_ms += interval

    def _prefix_candidates(self, request: RoutedRequest) -> list[int]:
        matched, node = self.tree.prefix_match(request.units, request.unit_chars)
        rate = matched / request.text_chars if request.text_chars else 0.0
        if rate < self.parameters.match_rate_threshold:
            counts = self.tree.tenant_chars
            fewest = min(counts)
            return [tenant for tenant, chars in enumerate(counts) if chars == fewest]
        return sorted(node.tenants)

    def _two_choices(self) -> list[int]:
        count = self.num_replicas
        if count == 1:
            return [0]
        if count == 2:
            return [0, 1] if self.generator.getrandbits(1) else [1, 0]
        first = self.generator.randrange(count)
        second = self.generator.randrange(count - 1)
        return [first, second + (second >= first)]

    def route(self, request: RoutedRequest, fleet: FleetState) -> int:
        if self.parameters.do_eviction:
            self._evict(request.now_ms)
        queues = fleet.in_flight
        candidates: list[int] = []
        limit = self.parameters.imbalanced_threshold
        if limit is None or max(queues) - min(queues) <= limit:
            candidates = self._prefix_candidates(request)
        if not candidates:
            candidates = self._two_choices()
        chosen = min(candidates, key=queues.__getitem__)  # the first of the lowest
        self.clock += 1
        self.tree.insert(request.units, request.unit_chars, chosen, float(self.clock))
        return chosen
