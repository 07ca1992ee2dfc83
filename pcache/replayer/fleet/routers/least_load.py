"""`least-load`: the replica with the fewest requests in flight, ties to the first.

The load is what the router counts itself (incremented at dispatch, decremented when the
response completes), as SGLang's router and KubeAI's `LeastLoad` track it; ties go to the
first replica, as Rust's `min_by_key` in SGLang's router does. A serial replay has no load
signal: every request finds every replica idle, so all of them go to replica 0. Use
`--concurrency timed` for a load signal. No parameters.
"""

from __future__ import annotations

from dataclasses import dataclass

from pcache.replayer.fleet.routers.request import FleetState, RoutedRequest


@dataclass(frozen=True, slots=True)
class Parameters:
    """least-load has no parameters."""


class Router:
    """The least-loaded replica."""

    def __init__(self, num_replicas: int, parameters: Parameters):
        self.num_replicas = num_replicas

    def route(self, request: RoutedRequest, fleet: FleetState) -> int:
        return fleet.least_loaded()
