"""`precise`: the exact token-block index, what a KV-event router knows (llm-d's precise
prefix-cache scorer, Dynamo's KV indexer, with their load terms off).

The request goes to the replica whose pool holds the longest prefix of its blocks, as the
engine would count the hit (`RoutedRequest.cached_tokens`). Ties (including "no replica holds
any of it") go to the fewest requests in flight, then to the next replica in turn from a
rotating start, so that new prefixes spread over the fleet. No parameters.

With unlimited caches its fleet hit rate is the single instance's: every prefix an earlier
request left is held by the replica that request went to.
"""

from __future__ import annotations

from dataclasses import dataclass

from pcache.replayer.fleet.routers.request import FleetState, RoutedRequest


@dataclass(frozen=True, slots=True)
class Parameters:
    """precise has no parameters."""


class Router:
    """The replica holding the longest cached prefix."""

    def __init__(self, num_replicas: int, parameters: Parameters):
        self.num_replicas = num_replicas
        self.turn = 0

    def route(self, request: RoutedRequest, fleet: FleetState) -> int:
        cached = request.cached_tokens
        best = max(cached)
        tied = [replica for replica, tokens in enumerate(cached) if tokens == best]
        if len(tied) > 1:
            lowest = min(fleet.in_flight[replica] for replica in tied)
            tied = [replica for replica in tied if fleet.in_flight[replica] == lowest]
        if len(tied) == 1:
            return tied[0]
        start = self.turn % self.num_replicas
        self.turn += 1
        return min(tied, key=lambda replica: (replica - start) % self.num_replicas)
