"""`round-robin`: replica `i mod N` for the i-th request (every router's baseline).

As SGLang's `round_robin`, vLLM production-stack's `roundrobin` and Ray's default: a counter
over the replicas in a fixed order; it reads nothing of the request. No parameters.
"""

from __future__ import annotations

from dataclasses import dataclass

from pcache.replayer.fleet.routers.request import FleetState, RoutedRequest


@dataclass(frozen=True, slots=True)
class Parameters:
    """round-robin has no parameters."""


class Router:
    """The next replica in turn."""

    def __init__(self, num_replicas: int, parameters: Parameters):
        self.num_replicas = num_replicas
        self.count = 0

    def route(self, request: RoutedRequest, fleet: FleetState) -> int:
        chosen = self.count % self.num_replicas
        self.count += 1
        return chosen
