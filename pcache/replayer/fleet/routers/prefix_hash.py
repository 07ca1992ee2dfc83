"""`prefix-hash`: KubeAI's `PrefixHash`, consistent hashing with bounded loads (CHWBL) of the
first characters of the prompt.

The key is the first `prefix_chars` characters of the text view (default 100; on hash-id
traces the ids covering them). The key's position on a ring of `replication` virtual nodes
per replica (default 256) picks the first replica clockwise whose load stays within the
bound: in flight + 1 <= `mean_load_factor` x max(1, (total in flight + 1) // N), with
`mean_load_factor` 1.25 (KubeAI's `meanLoadPercentage` 125). A serial replay has nothing in
flight, so the bound never binds there and the route is the key's ring owner.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pcache.replayer.fleet.routers.request import FleetState, RoutedRequest
from pcache.replayer.fleet.routers.ring import HashRing


@dataclass(frozen=True, slots=True)
class Parameters:
    """prefix-hash's parameters."""

    prefix_chars: int = field(default=100, metadata={"minimum": 1})
    """Characters of the prompt hashed (KubeAI `prefixCharLength`)."""
    replication: int = field(default=256, metadata={"minimum": 1})
    """Virtual nodes per replica (KubeAI `replication`)."""
    mean_load_factor: float = field(default=1.25, metadata={"minimum": 1})
    """Load bound relative to the mean (KubeAI `meanLoadPercentage` / 100)."""


class Router:
    """The first replica clockwise from the prefix's hash that is within the load bound."""

    def __init__(self, num_replicas: int, parameters: Parameters):
        self.parameters = parameters
        self.ring = HashRing(num_replicas, parameters.replication)

    def route(self, request: RoutedRequest, fleet: FleetState) -> int:
        key = repr(request.leading_text(self.parameters.prefix_chars)).encode()
        loads = fleet.in_flight
        mean = max((sum(loads) + 1) // len(loads), 1) * self.parameters.mean_load_factor
        first = None
        for replica in self.ring.walk(key):
            first = replica if first is None else first
            if loads[replica] + 1 <= mean:
                return replica
        assert first is not None
        return first
